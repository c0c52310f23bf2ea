/**
 * sudo's own words when it needed a password and could not ask for one, in English and in its French translation
 * (the service's users are French-speaking; their distros often are too).
 */
const PASSWORD_FAILURES = [
  /sudo: .*a password is required/i,
  /sudo: .*a terminal is required to read the password/i,
  /sudo: .*no tty present and no askpass program specified/i,
  /sudo: .*il est nécessaire de saisir un mot de passe/i,
  /sudo: .*un mot de passe est (nécessaire|requis)/i,
  /sudo: .*un terminal est requis pour lire le mot de passe/i,
  /sudo: .*aucun tty présent/i
]

/** Longest message above plus room for a prefix, so a message split across two chunks is still seen whole. */
const CARRY_BYTES = 256

/**
 * Watches the agent's output as it streams, so a sudo failure is seen even in output too large to keep whole.
 */
export class SudoPasswordDetector {
  #carry = ''
  #detected = false

  get detected(): boolean {
    return this.#detected
  }

  push(chunk: Buffer): void {
    if (this.#detected) return
    const text = this.#carry + chunk.toString('utf8')
    this.#detected = PASSWORD_FAILURES.some((pattern) => pattern.test(text))
    this.#carry = text.slice(-CARRY_BYTES)
  }
}
