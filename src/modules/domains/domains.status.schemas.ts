import { Type } from 'typebox';
import { Uuid } from '../../http/schemas.js';

const Strings = Type.Array(Type.String());

/** The reference's DomainStatus, the fields a DNS check fills (no HTTP probe is made). */
export const DomainStatusSchema = Type.Object({
  name: Type.String(),
  install_name: Type.String(),
  complete: Type.Boolean(),
  result: Type.Optional(Type.String({ enum: ['pointed', 'not_pointed', 'not_found', 'dns_error'] })),
  dns_error: Type.Optional(Type.Boolean()),
  cname: Type.Optional(Type.String()),
  a_record: Type.Optional(Type.String()),
  aaaa_record: Type.Optional(Type.String()),
  ip: Type.Optional(Strings),
  address: Type.Optional(Strings),
});

/** The reference's DomainStatusReport, wrapped in `report`. */
export const DomainReportStatusSchema = Type.Object(
  {
    report: Type.Object({
      complete: Type.Boolean(),
      id: Uuid(),
      install_name: Type.String(),
      install_ip: Type.Optional(Type.String()),
      admin: Type.Boolean(),
      domains: Type.Array(DomainStatusSchema),
    }),
  },
  { description: 'A domain status report' },
);

/** The reference's DomainReport. */
export const DomainReportSchema = Type.Object(
  { report_id: Uuid() },
  { description: 'Accepted: the report id to ask about' },
);

export const CheckStatusParams = Type.Object({ install_id: Uuid(), domain_id: Uuid() });
export const ReportParams = Type.Object({ install_id: Uuid(), report_id: Uuid() });
