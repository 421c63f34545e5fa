import { isIPv4, isIPv6 } from 'node:net';

const MAPPED_IPV4 = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/**
 * The quota identity of a client address: IPv4 as is, IPv4-mapped IPv6 as IPv4, IPv6 reduced to its
 * `/subnet` network (one /64 is usually one subscriber, who can otherwise rotate through 2^64 addresses).
 * Anything that is not an IP address is returned unchanged.
 * @example clientIpKey('2001:db8::1:2:3:4', 64) // '2001:db8:0:0::/64'
 */
export function clientIpKey(address: string, subnet = 64): string {
  if (!address.includes(':')) return address; // IPv4 (the common case): nothing to map or group
  const mapped = MAPPED_IPV4.exec(address);
  if (mapped && isIPv4(mapped[1])) return mapped[1];
  const bare = address.split('%')[0]; // drop an IPv6 zone id (fe80::1%eth0)
  if (!isIPv6(bare)) return address;
  const hextets = maskHextets(expandIPv6(bare), subnet);
  if (subnet >= 128) return hextets.join(':');
  return `${hextets.slice(0, Math.ceil(subnet / 16)).join(':')}::/${subnet}`;
}

/** The eight 16-bit groups of a valid IPv6 address (an embedded IPv4 tail becomes two groups). */
function expandIPv6(address: string): number[] {
  let text = address;
  const v4 = /(\d{1,3}(?:\.\d{1,3}){3})$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4[1].split('.').map(Number);
    text = `${text.slice(0, -v4[1].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const parse = (part: string | undefined) => (part ? part.split(':').map((h) => parseInt(h, 16)) : []);
  const left = parse(head);
  const right = parse(tail);
  const zeros = tail === undefined ? [] : new Array<number>(8 - left.length - right.length).fill(0);
  return [...left, ...zeros, ...right];
}

function maskHextets(hextets: number[], subnet: number): string[] {
  return hextets.map((value, i) => {
    const bits = Math.min(Math.max(subnet - i * 16, 0), 16);
    const mask = bits === 0 ? 0 : (0xffff << (16 - bits)) & 0xffff;
    return (value & mask).toString(16);
  });
}
