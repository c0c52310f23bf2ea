/**
 * sudo's own words when it needed a password and could not ask for one, in English and in its French translation
 * (the service's users are French-speaking; their distros often are too).
 */
const PASSWORD_FAILURES = [
  /^sudo: .*a password is required/i,
  /^sudo: .*a terminal is required to read the password/i,
  /^sudo: .*no tty present and no askpass program specified/i,
  /^sudo: .*il est nécessaire de saisir un mot de passe/i,
  /^sudo: .*un mot de passe est (nécessaire|requis)/i,
  /^sudo: .*un terminal est requis pour lire le mot de passe/i,
  /^sudo: .*aucun tty présent/i,
  // `sudo -S` given a wrong password on standard input, or none: it needed one all the same.
  /^sudo: \d+ incorrect password attempts?/i,
  /^sudo: no password was provided/i,
  /^sudo: \d+ saisies? de mots? de passe incorrectes?/i,
  /^sudo: aucun mot de passe (n’a été |n'a été )?fourni/i
]

/** Longest message above plus room for a prefix, so a message split across two chunks is still seen whole. */
const WINDOW_BYTES = 256
/** Every message starts with sudo naming itself; bytes without it are never decoded. */
const SUDO = Buffer.from('sudo:')

/**
 * Watches the agent's output as it streams, so a sudo failure is seen even in output too large to keep whole. An output
 * observer: it searches the raw bytes for `sudo:` (a memchr-speed scan) and decodes only the window after a hit, since
 * the agent's output is mostly anything but sudo's messages.
 */
export class SudoPasswordDetector {
  /** The last bytes seen, copied (never a view that would keep a large chunk alive), for a message split in two. */
  #carry = Buffer.alloc(0)
  #detected = false

  get detected(): boolean {
    return this.#detected
  }

  readonly push = (chunk: Buffer): void => {
    if (this.#detected) return
    const seam = Buffer.concat([this.#carry, chunk.subarray(0, WINDOW_BYTES)])
    this.#detected = SudoPasswordDetector.#inBytes(seam) || SudoPasswordDetector.#inBytes(chunk)
    const kept = chunk.length >= WINDOW_BYTES ? chunk.subarray(-WINDOW_BYTES) : seam.subarray(-WINDOW_BYTES)
    this.#carry = Buffer.from(kept)
  }

  static #inBytes(bytes: Buffer): boolean {
    for (let at = bytes.indexOf(SUDO); at !== -1; at = bytes.indexOf(SUDO, at + 1)) {
      const text = bytes.toString('utf8', at, at + WINDOW_BYTES)
      if (PASSWORD_FAILURES.some((pattern) => pattern.test(text))) return true
    }
    return false
  }
}
