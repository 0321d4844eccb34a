/** The usage benches' seeding statements (bench/usage.bench.ts, bench/pglite-wasm.bench.ts). */

/** Sites and installs of one account (one install per site), then its usage rows: $1 account, $2 first day, $3 last. */
// 60 % production, 25 % staging, 15 % development; every 20th site a sandbox, every 10th (+1) not transferable.
export const SEED_INSTALLS = `with s as (
    insert into sites (account_id, name, sandbox, transferable, created_at)
    select $1::uuid, 'Bench site ' || n, n % 20 = 0, n % 10 <> 1, now() - make_interval(secs => $2::int - n)
    from generate_series(1, $2::int) n
    returning id, name, created_at
  )
  insert into installs (account_id, site_id, name, environment, status, created_at)
  select $1::uuid, s.id, 'b' || substr(md5(s.id::text), 1, 12),
    case when split_part(s.name, ' ', 3)::int % 20 < 12 then 'production'
         when split_part(s.name, ' ', 3)::int % 20 < 17 then 'staging' else 'development' end,
    'active', s.created_at
  from s`;
export const SEED_USAGE = `insert into install_usage_daily (install_id, date, visit_count, billable_visits,
    network_origin_bytes, network_cdn_bytes, network_total_bytes, storage_file_bytes,
    storage_database_bytes, request_origin_count)
  select i.id, d::date, v, v * 9 / 10, v * 40000, v * 160000, v * 200000,
    500000000 + (h % 1000) * 1000000, 20000000 + (h % 100) * 100000, v * 3
  from generate_series($2::date, $3::date, interval '1 day') d
  cross join installs i
  cross join lateral (select abs(hashtext(i.id::text || d::text))::bigint as h) x
  cross join lateral (select x.h % 5000 as v) y
  where i.account_id = $1::uuid
  order by d, i.id`;
