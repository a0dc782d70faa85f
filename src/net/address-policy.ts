import { BlockList, isIP } from 'node:net';
import { lookup as dnsLookup, LookupAddress } from 'node:dns';

/** Addresses an outbound request must not reach unless ALLOW_PRIVATE_URLS=1: loopback, private, link-local,
 * unspecified, carrier-grade NAT, multicast and reserved ranges, IPv4 and IPv6 (v4-mapped v6 included). */
const blocked = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96]] as const) {
  blocked.addSubnet(net, bits, 'ipv6');
}

export function isBlockedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return blocked.check(mapped[1], 'ipv4');
    return blocked.check(address, 'ipv6');
  }
  return true; // not an address at all: refuse
}

export class BlockedAddressError extends Error {
  override readonly name = 'BlockedAddressError';
  constructor(readonly host: string, readonly address: string) {
    super(`${host} resolves to ${address}, a loopback, private, link-local or unspecified address`);
  }
}

type LookupCb = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** A dns.lookup replacement for http(s).Agent: checks every resolved address at connect time, so what is checked
 * is what is connected to (no DNS-rebinding gap between a check and the request). */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: { all?: boolean; family?: number } | number, cb: LookupCb): void => {
    const opts = typeof options === 'number' ? { family: options } : options ?? {};
    dnsLookup(hostname, { ...opts, all: true }, (err, addrs) => {
      if (err) return cb(err, '');
      const list = addrs as LookupAddress[];
      if (!allowPrivate) {
        const bad = list.find((a) => isBlockedAddress(a.address));
        if (bad) return cb(new BlockedAddressError(hostname, bad.address) as NodeJS.ErrnoException, '');
      }
      if (opts.all) return cb(null, list);
      return cb(null, list[0].address, list[0].family);
    });
  };
}
