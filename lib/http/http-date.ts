/**
 * HTTP-date (RFC 9110 §5.6.7), strictly: the preferred IMF-fixdate and the two obsolete formats recipients
 * must still accept, all in GMT, case-sensitive. (`Date.parse` is no substitute: it reads "1" as the year 2001
 * and an asctime date, which has no zone, as local time.)
 */

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH = `(${MONTHS.join('|')})`;
const DAY_NAME = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';

/** `Sun, 06 Nov 1994 08:49:37 GMT` */
const IMF_FIXDATE = new RegExp(`^${DAY_NAME}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
/** `Sunday, 06-Nov-94 08:49:37 GMT` */
const RFC850_DATE = new RegExp(`^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
/** `Sun Nov  6 08:49:37 1994` */
const ASCTIME_DATE = new RegExp(`^${DAY_NAME} ${MONTH} (\\d{2}| \\d) ${TIME} (\\d{4})$`);

/** Fifty years, past which a two-digit year is read as a century earlier (RFC 9110 §5.6.7). */
const FIFTY_YEARS_MS = 50 * 365.2425 * 86_400_000;

/**
 * The instant an HTTP-date names, ms since the epoch; `undefined` for anything else (including an impossible
 * day or time such as 31 Feb or 25:00). `now` places an rfc850-date's two-digit year. The day name is not
 * checked against the date, as RFC 9110 does not ask recipients to.
 * @example parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT') // 784111777000
 */
export function parseHttpDate(value: string, now = Date.now()): number | undefined {
  let m = IMF_FIXDATE.exec(value);
  if (m) return instant(Number(m[3]), m[2], Number(m[1]), m[4], m[5], m[6]);
  m = ASCTIME_DATE.exec(value);
  if (m) return instant(Number(m[6]), m[1], Number(m[2].trim()), m[3], m[4], m[5]);
  m = RFC850_DATE.exec(value);
  if (!m) return undefined;
  const century = Math.floor(new Date(now).getUTCFullYear() / 100) * 100;
  const at = instant(century + Number(m[3]), m[2], Number(m[1]), m[4], m[5], m[6]);
  // "More than 50 years in the future": the most recent past year with the same last two digits.
  if (at !== undefined && at - now > FIFTY_YEARS_MS) return instant(century - 100 + Number(m[3]), m[2], Number(m[1]), m[4], m[5], m[6]);
  return at;
}

function instant(year: number, month: string, day: number, hh: string, mm: string, ss: string): number | undefined {
  const monthIndex = MONTHS.indexOf(month);
  const [h, min, s] = [Number(hh), Number(mm), Number(ss)];
  // A leap second (60) is allowed by the grammar; it reads as the next minute's first second.
  if (h > 23 || min > 59 || s > 60) return undefined;
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999.
  const date = new Date(0);
  date.setUTCFullYear(year, monthIndex, day);
  // A day the month does not have (31 Feb) rolls over into the next: such a date is garbage.
  if (date.getUTCDate() !== day || date.getUTCMonth() !== monthIndex) return undefined;
  return date.getTime() + ((h * 60 + min) * 60 + s) * 1000;
}
