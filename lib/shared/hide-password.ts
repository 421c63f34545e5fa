/**
 * `url` with the passwords replaced by `***`, for messages: the user info's, and query parameters ioredis reads
 * as options (`?password=`, `?sentinelPassword=`).
 * @example hidePassword('redis://app:secret@cache:6379') // 'redis://app:***@cache:6379'
 */
export function hidePassword(url: string): string {
  return url
    .replace(/^([a-z][a-z0-9+.-]*:\/\/)?([^/]*)@/i, (_match, scheme: string | undefined, userInfo: string) => {
      const colon = userInfo.indexOf(':');
      return `${scheme ?? ''}${colon === -1 ? userInfo : `${userInfo.slice(0, colon)}:***`}@`;
    })
    .replace(/([?&][a-z]*password=)[^&#]*/gi, '$1***');
}
