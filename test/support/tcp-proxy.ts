import net from 'node:net';

/**
 * How a dependency goes away:
 * - `refuse`: open connections are reset and the port is closed (a stopped server: ECONNREFUSED).
 * - `blackhole`: open connections are reset; new ones are accepted but never answered (a dead host).
 * - `freeze`: open connections stay open but no byte passes any more, and new ones are accepted and
 *   never answered (a network partition that sends no reset: the slowest failure to notice).
 * - `mute`: what clients send still reaches the dependency, but nothing comes back on open
 *   connections (new ones are accepted and never answered): an answer lost after the work was done.
 */
export type CutMode = 'refuse' | 'blackhole' | 'freeze' | 'mute';

/** A TCP proxy in front of a dependency (PostgreSQL, Redis) that a test can cut and restore (G11). */
export interface TcpProxy {
  /** The local port clients connect to. */
  readonly port: number;
  cut(mode?: CutMode): Promise<void>;
  /** Brings the dependency back on the same port; connections left from the cut are reset. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

function listen(server: net.Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : port);
    });
  });
}

/** Starts a proxy on a free local port that forwards to `targetHost:targetPort`. */
export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  const pairs = new Set<[net.Socket, net.Socket]>();
  let forwarding = true;

  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };

  const server = net.createServer((client) => {
    track(client);
    if (!forwarding) return; // accepted, never answered
    const upstream = net.connect(targetPort, targetHost);
    track(upstream);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => {
      upstream.destroy();
      pairs.delete(pair);
    });
    upstream.on('close', () => client.destroy());
  });

  const port = await listen(server, 0);
  const resetAll = () => {
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    pairs.clear();
  };
  // Stop accepting first, then reset what is open: close() calls back once no connection is left.
  const stopListening = async () => {
    if (!server.listening) return resetAll();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    resetAll();
    await closed;
  };

  return {
    port,
    async cut(mode = 'refuse') {
      forwarding = false;
      if (mode === 'refuse') return stopListening();
      if (mode === 'blackhole') return resetAll();
      if (mode === 'mute') {
        for (const [client, upstream] of pairs) {
          upstream.unpipe(client);
          upstream.pause();
        }
        return;
      }
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    async restore() {
      resetAll();
      forwarding = true;
      if (!server.listening) await listen(server, port);
    },
    close: stopListening,
  };
}
