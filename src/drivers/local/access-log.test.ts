import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type { TrafficDay } from '../driver.js';
import { parseLine, rollLog } from './access-log.js';

const line = (time: string, status: number, bytes: number, cache: string, ip: string) =>
  `${Date.parse(time) / 1000}\t${status}\t${bytes}\t${cache}\t${ip}\n`;

describe('access-log roll-up (issue 21, usage from the server)', async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hostplane-access-log-'));
  after(() => fs.rm(dir, { recursive: true, force: true }));

  it('parses the hostplane_usage format and refuses other lines', () => {
    assert.deepEqual(parseLine('1764115200.123\t200\t512\tHIT\t10.0.0.1'), {
      date: '2025-11-26',
      bytes: 512,
      cached: true,
      ip: '10.0.0.1',
    });
    assert.equal(parseLine('1764115200.123\t200\t512\t-\t10.0.0.1')?.cached, false);
    assert.equal(parseLine('garbage'), null);
    assert.equal(parseLine('x\t200\t1\t-\tip'), null);
  });

  it('counts whole lines once, leaves a half-written line for later, reads a rotated log to its end and a truncated one from its start', async () => {
    const log = path.join(dir, 'a.access.log');
    const stored: TrafficDay[][] = [];
    const half = line('2026-11-26T10:00:03Z', 200, 7, '-', '3.3.3.3');
    const roll = () => rollLog(log, async (days) => void stored.push(days), '2026-11-26');
    await fs.writeFile(
      log,
      line('2026-11-26T10:00:00Z', 200, 1000, 'MISS', '1.1.1.1') +
        line('2026-11-26T10:00:01Z', 200, 1000, 'HIT', '1.1.1.1') +
        line('2026-11-26T10:00:02Z', 200, 500, '-', '2.2.2.2') +
        half.slice(0, 14), // half written
    );
    let days = await roll();
    assert.deepEqual(days, [
      {
        date: '2026-11-26',
        visits: 2,
        requests: 3,
        origin_requests: 2,
        origin_bytes: 1500,
        total_bytes: 2500,
      },
    ]);
    // Nothing new: nothing stored.
    assert.deepEqual(await roll(), []);
    // The half-written line is finished, then the log is rotated (renamed to .1) with one more line in it.
    await fs.appendFile(log, half.slice(14) + line('2026-11-26T11:00:00Z', 404, 100, '-', '1.1.1.1'));
    await fs.rename(log, `${log}.1`);
    await fs.writeFile(log, line('2026-11-27T00:00:01Z', 200, 10, 'HIT', '4.4.4.4'));
    days = await roll();
    assert.deepEqual(days, [
      {
        date: '2026-11-26',
        visits: 3,
        requests: 5,
        origin_requests: 4,
        origin_bytes: 1607,
        total_bytes: 2607,
      },
      { date: '2026-11-27', visits: 1, requests: 1, origin_requests: 0, origin_bytes: 0, total_bytes: 10 },
    ]);
    // Truncated in place: new lines add to the day's totals.
    await fs.truncate(log, 0);
    await fs.appendFile(log, line('2026-11-27T00:00:02Z', 200, 5, 'MISS', '4.4.4.4'));
    days = await roll();
    assert.deepEqual(days, [
      { date: '2026-11-27', visits: 1, requests: 2, origin_requests: 1, origin_bytes: 5, total_bytes: 15 },
    ]);
    // A store that fails: the state does not move, the next roll-up hands on the same totals.
    await fs.appendFile(log, line('2026-11-27T00:00:03Z', 200, 5, 'MISS', '5.5.5.5'));
    await assert.rejects(
      rollLog(
        log,
        async () => {
          throw new Error('database down');
        },
        '2026-11-27',
      ),
      /database down/,
    );
    days = await roll();
    assert.equal(days[0]?.requests, 3);
    assert.equal(days[0]?.visits, 2);
  });
});
