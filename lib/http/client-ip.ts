import { isIPv6 } from 'node:net';

/**
 * The quota identity of a client address: IPv4 as is; an IPv4-mapped IPv6 address (`::ffff:0:0/96`) as its
 * IPv4 address, however it is spelled (`::ffff:1.2.3.4`, `::ffff:0102:0304`, `0:0:0:0:0:ffff:1.2.3.4`…);
 * any other IPv6 address as its `/subnet` network (one /64 is usually one subscriber, who can otherwise
 * rotate through 2^64 addresses), written one way whatever the spelling: lowercase, no leading zeros, no
 * `::` inside the network part, embedded IPv4 as hex, zone id (`%eth0`) dropped.
 * Anything that is not an IP address is returned unchanged.
 * @example clientIpKey('2001:db8::1:2:3:4', 64) // '2001:db8:0:0::/64'
 * @example clientIpKey('::ffff:cb00:7107') // '203.0.113.7'
 */
export function clientIpKey(address: string, subnet = 64): string {
  if (!address.includes(':')) return address; // IPv4 (the common case): nothing to map or group
  const zone = address.indexOf('%');
  const bare = zone < 0 ? address : address.slice(0, zone);
  if (!isIPv6(bare)) return address;
  const hextets = parseIPv6(bare);
  if (isIPv4Mapped(hextets)) return `${hextets[6] >> 8}.${hextets[6] & 0xff}.${hextets[7] >> 8}.${hextets[7] & 0xff}`;
  const network = maskHextets(hextets, subnet);
  if (subnet >= 128) return network.join(':');
  return `${network.slice(0, Math.ceil(subnet / 16)).join(':')}::/${subnet}`;
}

/** The eight 16-bit groups of a valid IPv6 address (`isIPv6`): `::` expanded, an embedded IPv4 tail as two groups. */
function parseIPv6(address: string): number[] {
  const [head, tail] = address.split('::');
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  const zeros = new Array<number>(8 - left.length - right.length).fill(0);
  return [...left, ...zeros, ...right];
}

function groups(part: string): number[] {
  if (part === '') return [];
  return part.split(':').flatMap((group) => {
    if (!group.includes('.')) return [parseInt(group, 16)];
    const [a, b, c, d] = group.split('.').map(Number);
    return [(a << 8) | b, (c << 8) | d];
  });
}

/** `::ffff:0:0/96`: eighty zero bits, sixteen one bits, then the IPv4 address. */
function isIPv4Mapped(hextets: readonly number[]): boolean {
  for (let i = 0; i < 5; i++) if (hextets[i] !== 0) return false;
  return hextets[5] === 0xffff;
}

function maskHextets(hextets: readonly number[], subnet: number): string[] {
  return hextets.map((value, i) => {
    const bits = Math.min(Math.max(subnet - i * 16, 0), 16);
    const mask = bits === 0 ? 0 : (0xffff << (16 - bits)) & 0xffff;
    return (value & mask).toString(16);
  });
}
