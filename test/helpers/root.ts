import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The directory holding package.json above `from`: the repository, wherever the tests run compiled from. */
function repositoryAbove(from: string): string {
  const parent = dirname(from)
  if (existsSync(join(from, 'package.json'))) return from
  if (parent === from) throw new Error('no package.json above the tests')
  return repositoryAbove(parent)
}

/** The repository's root: the tests run compiled into dist-test/, and read fixtures, docs and dist/ from here. */
export const ROOT = repositoryAbove(dirname(fileURLToPath(import.meta.url)))

/** A path inside the repository. */
export const fromRoot = (...parts: string[]): string => join(ROOT, ...parts)
