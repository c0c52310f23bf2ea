import { execFile } from 'node:child_process'
import { wslProcessEnv } from './wsl-group.js'

/** Distros are installed and removed by hand, rarely: a list this old is still worth trusting for a hit. */
const LIST_TTL_MS = 30_000

/**
 * The distros wsl.exe knows (`wsl --list --quiet`), so that a request naming one that does not exist is refused before
 * anything runs. A name not in the list asks again once (it may have just been installed). Names compare
 * case-insensitively, as wsl.exe's service compares them.
 */
export class WslDistros {
  readonly #wslBin: string
  readonly #env: NodeJS.ProcessEnv
  #list: { names: string[]; at: number } | undefined

  constructor(wslBin: string, env: NodeJS.ProcessEnv) {
    this.#wslBin = wslBin
    this.#env = env
  }

  /** true or false when wsl.exe answered; undefined when it could not be asked (then the run itself will say why). */
  async exists(distro: string): Promise<boolean | undefined> {
    const fresh = this.#list !== undefined && Date.now() - this.#list.at < LIST_TTL_MS
    if (fresh && this.#has(distro)) return true
    const names = await listDistros(this.#wslBin, this.#env)
    if (names === undefined) return undefined
    this.#list = { names, at: Date.now() }
    return this.#has(distro)
  }

  #has(distro: string): boolean {
    return this.#list!.names.some((name) => name.toLowerCase() === distro.toLowerCase())
  }
}

function listDistros(wslBin: string, env: NodeJS.ProcessEnv): Promise<string[] | undefined> {
  return new Promise((resolve) => {
    const options = { env: wslProcessEnv(env), timeout: 10_000, windowsHide: true }
    execFile(wslBin, ['--list', '--quiet'], options, (error, stdout) => {
      if (error) return resolve(undefined)
      resolve(stdout.split(/\r?\n/).map((name) => name.trim()).filter((name) => name !== ''))
    })
  })
}
