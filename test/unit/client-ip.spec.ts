import { clientIpKey } from '../../lib/http/client-ip';
import { IpTrackers } from '../../lib/http/tracker';

describe('clientIpKey', () => {
  it.each([
    ['IPv4 unchanged', '203.0.113.7', 64, '203.0.113.7'],
    ['IPv4-mapped IPv6 as IPv4', '::ffff:203.0.113.7', 64, '203.0.113.7'],
    ['IPv6 grouped by /64', '2001:db8:0:1:aaaa:bbbb:cccc:dddd', 64, '2001:db8:0:1::/64'],
    ['compressed IPv6 grouped by /64', '2001:db8::1', 64, '2001:db8:0:0::/64'],
    ['IPv6 grouped by /48', '2001:db8:7:1::1', 48, '2001:db8:7::/48'],
    ['IPv6 grouped by /56 (mid-hextet)', '2001:db8:0:12ab::1', 56, '2001:db8:0:1200::/56'],
    ['IPv6 /128 kept whole', '2001:db8::1', 128, '2001:db8:0:0:0:0:0:1'],
    ['loopback ::1 grouped', '::1', 64, '0:0:0:0::/64'],
    ['zone id dropped', 'fe80::1%eth0', 64, 'fe80:0:0:0::/64'],
    ['embedded IPv4 tail', '64:ff9b::203.0.113.7', 128, '64:ff9b:0:0:0:0:cb00:7107'],
    ['upper case normalised', '2001:DB8::1', 64, '2001:db8:0:0::/64'],
    ['not an address: unchanged', 'unknown', 64, 'unknown'],
  ])('%s', (_name, address, subnet, expected) => {
    expect(clientIpKey(address, subnet)).toBe(expected);
  });

  it('puts two addresses of one /64 in one group and a neighbouring /64 in another', () => {
    expect(clientIpKey('2001:db8:0:1::1')).toBe(clientIpKey('2001:db8:0:1:ffff:ffff:ffff:ffff'));
    expect(clientIpKey('2001:db8:0:1::1')).not.toBe(clientIpKey('2001:db8:0:2::1'));
  });
});

describe('IpTrackers (the `ip:` tracker of each recent client address)', () => {
  it('is ip:<clientIpKey> under its own subnet, and ip:unknown without an address', () => {
    const by48 = new IpTrackers(48);
    const by64 = new IpTrackers(64);
    expect(by48.of('2001:db8:7:1::1')).toBe('ip:2001:db8:7::/48');
    expect(by64.of('2001:db8:7:1::1')).toBe('ip:2001:db8:7:1::/64');
    expect(by64.of('::ffff:203.0.113.7')).toBe('ip:203.0.113.7');
    expect(by64.of(undefined)).toBe('ip:unknown');
    expect(by64.of('')).toBe('ip:unknown');
  });

  it('gives a repeated address the tracker it remembered, and keeps addresses apart', () => {
    const ips = new IpTrackers(64);
    const first = ips.of('203.0.113.7');
    expect(ips.of('203.0.113.8')).toBe('ip:203.0.113.8');
    expect(ips.of('203.0.113.7')).toBe(first);
    expect(first).toBe('ip:203.0.113.7');
  });
});
