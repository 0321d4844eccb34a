#!/usr/bin/env python3
"""Prints the operations of the platform's reference document (Swagger 2.0) as a Markdown table
skeleton: one row per operation, in document order. docs/conformance.md's "Operations of the
reference document" table was generated with it, then the served/test columns filled in.

Usage: python3 scripts/reference-operations.py [../shared/spec/reference/platform-openapi-1.17.json]
"""
import json
import sys

path = sys.argv[1] if len(sys.argv) > 1 else '../shared/spec/reference/platform-openapi-1.17.json'
with open(path, encoding='utf-8') as f:
    doc = json.load(f)
n = 0
for route, ops in doc['paths'].items():
    for method, op in ops.items():
        if method not in ('get', 'post', 'put', 'patch', 'delete'):
            continue
        n += 1
        print(f"| {n} | `{method.upper()} {doc['basePath']}{route}` | {op.get('operationId') or '(none)'} |")
print(f'{n} operations', file=sys.stderr)
