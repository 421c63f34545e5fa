/** CRC16-XMODEM (polynomial 0x1021), the checksum Redis Cluster hashes keys with. */
const CRC16_TABLE = Uint16Array.from({ length: 256 }, (_, byte) => {
  let crc = byte << 8;
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
  return crc & 0xffff;
});

function crc16(crc: number, byte: number): number {
  return ((crc << 8) ^ CRC16_TABLE[((crc >> 8) ^ byte) & 0xff]) & 0xffff;
}

/**
 * The Redis Cluster slot of `key`: CRC16 of its hash tag (what lies between the first `{` and the next `}`,
 * when not empty) or of the whole key, over the UTF-8 bytes ioredis sends (a lone surrogate as U+FFFD), mod
 * 16384. Computed on the string, without encoding it: it is on every Cluster decision's path.
 */
export function hashSlot(key: string): number {
  let from = 0;
  let to = key.length;
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) {
      from = open + 1;
      to = close;
    }
  }
  let crc = 0;
  for (let i = from; i < to; i++) {
    let code = key.charCodeAt(i);
    if (code < 0x80) {
      crc = crc16(crc, code);
      continue;
    }
    if (code < 0x800) {
      crc = crc16(crc16(crc, 0xc0 | (code >> 6)), 0x80 | (code & 0x3f));
      continue;
    }
    if (code >= 0xd800 && code <= 0xdfff) {
      const low = i + 1 < to ? key.charCodeAt(i + 1) : 0;
      if (code <= 0xdbff && low >= 0xdc00 && low <= 0xdfff) {
        code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
        i++;
        crc = crc16(crc16(crc, 0xf0 | (code >> 18)), 0x80 | ((code >> 12) & 0x3f));
        crc = crc16(crc16(crc, 0x80 | ((code >> 6) & 0x3f)), 0x80 | (code & 0x3f));
        continue;
      }
      code = 0xfffd;
    }
    crc = crc16(crc16(crc16(crc, 0xe0 | (code >> 12)), 0x80 | ((code >> 6) & 0x3f)), 0x80 | (code & 0x3f));
  }
  return crc & 0x3fff;
}
