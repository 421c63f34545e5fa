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

  it.each([
    '::ffff:203.0.113.7',
    '::FFFF:203.0.113.7',
    '::ffff:cb00:7107',
    '::FFFF:CB00:7107',
    '::ffff:CB00:7107',
    '0:0:0:0:0:ffff:203.0.113.7',
    '0:0:0:0:0:ffff:cb00:7107',
    '0000:0000:0000:0000:0000:FFFF:CB00:7107',
    '0::ffff:203.0.113.7',
    '::0:ffff:cb00:7107',
    '0:0:0::0:ffff:203.0.113.7',
    '::ffff:203.0.113.7%eth0',
    '::ffff:cb00:7107%1',
  ])('IPv4-mapped %s is the IPv4 address 203.0.113.7, whatever the subnet', (address) => {
    expect([64, 48, 128].map((subnet) => clientIpKey(address, subnet))).toEqual(['203.0.113.7', '203.0.113.7', '203.0.113.7']);
  });

  it.each([
    ['::ffff:0102:0304', '1.2.3.4'],
    ['::ffff:102:304', '1.2.3.4'],
    ['::ffff:0:0', '0.0.0.0'],
    ['::ffff:ffff:ffff', '255.255.255.255'],
    ['::ffff:0a00:0001', '10.0.0.1'],
  ])('IPv4-mapped %s written in hex is %s', (address, expected) => {
    expect(clientIpKey(address)).toBe(expected);
  });

  it.each([
    ['loopback', '::1', '0:0:0:0::/64', '0:0:0:0:0:0:0:1'],
    ['unspecified', '::', '0:0:0:0::/64', '0:0:0:0:0:0:0:0'],
    ['::ffff (the last hextet alone)', '::ffff', '0:0:0:0::/64', '0:0:0:0:0:0:0:ffff'],
    ['IPv4-compatible (deprecated)', '::203.0.113.7', '0:0:0:0::/64', '0:0:0:0:0:0:cb00:7107'],
    ['IPv4-translated ::ffff:0:0/96', '::ffff:0:203.0.113.7', '0:0:0:0::/64', '0:0:0:0:ffff:0:cb00:7107'],
    ['NAT64 64:ff9b::/96', '64:ff9b::203.0.113.7', '64:ff9b:0:0::/64', '64:ff9b:0:0:0:0:cb00:7107'],
    ['ffff in the fifth hextet', '0:0:0:0:ffff::cb00:7107', '0:0:0:0::/64', '0:0:0:0:ffff:0:cb00:7107'],
    ['mapped-looking outside ::/80', '1::ffff:203.0.113.7', '1:0:0:0::/64', '1:0:0:0:0:ffff:cb00:7107'],
  ])('%s (%s) is IPv6, not IPv4-mapped', (_name, address, by64, by128) => {
    expect([clientIpKey(address, 64), clientIpKey(address, 128)]).toEqual([by64, by128]);
  });

  it.each([
    '2001:db8:0:1::1',
    '2001:DB8:0:1::1',
    '2001:0db8:0000:0001:0000:0000:0000:0001',
    '2001:0DB8:0:1:0:0:0:1',
    '2001:db8:0:1:0::1',
    '2001:db8:0:1::0.0.0.1',
    '2001:db8:0:1:0:0:0.0.0.1',
    '2001:db8:0:1::1%eth0',
    '2001:db8:0:1::1%25',
    '2001:db8:0:1:ffff:ffff:255.255.255.255',
    '2001:db8:0:1:FFFF:FFFF:FFFF:FFFF',
  ])('%s: every spelling of an address of 2001:db8:0:1::/64 is that /64', (address) => {
    expect(clientIpKey(address, 64)).toBe('2001:db8:0:1::/64');
  });

  it.each([
    ['2001:0DB8:0000:0001:0000:0000:0000:0001', 128, '2001:db8:0:1:0:0:0:1'],
    ['2001:db8:0:1::0.0.0.1%eth0', 128, '2001:db8:0:1:0:0:0:1'],
    ['2001:0DB8:0007:00FF::1', 48, '2001:db8:7::/48'],
    ['2001:DB8:0:12AB::1', 56, '2001:db8:0:1200::/56'],
    ['FE80::1%eth0', 64, 'fe80:0:0:0::/64'],
    ['fe80:0000:0000:0000:abcd:ef01:2345:6789%wlan0', 64, 'fe80:0:0:0::/64'],
  ])('%s at /%d is %s', (address, subnet, expected) => {
    expect(clientIpKey(address, subnet)).toBe(expected);
  });

  it.each(['::ffff:01.2.3.4', '::ffff:1.2.3.256', '1::2::3', '02001:db8::1', '[::1]', ':', '::ffff:1.2.3.4.5'])(
    'leaves %s (not an IP address) unchanged',
    (address) => {
      expect(clientIpKey(address)).toBe(address);
    },
  );

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

  it('gives every spelling of an IPv4-mapped address the IPv4 tracker, never the ::/64 of ::1', () => {
    const ips = new IpTrackers(64);
    const spellings = ['203.0.113.7', '::ffff:203.0.113.7', '::ffff:cb00:7107', '0:0:0:0:0:ffff:203.0.113.7', '::FFFF:CB00:7107%eth0'];
    expect(spellings.map((address) => ips.of(address))).toEqual(spellings.map(() => 'ip:203.0.113.7'));
    expect(ips.of('::1')).toBe('ip:0:0:0:0::/64');
  });

  it('gives a repeated address the tracker it remembered, and keeps addresses apart', () => {
    const ips = new IpTrackers(64);
    const first = ips.of('203.0.113.7');
    expect(ips.of('203.0.113.8')).toBe('ip:203.0.113.8');
    expect(ips.of('203.0.113.7')).toBe(first);
    expect(first).toBe('ip:203.0.113.7');
  });
});
