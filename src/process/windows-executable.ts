import { constants } from 'node:fs'
import { access, readFile } from 'node:fs/promises'
import { dirname, extname, isAbsolute, join, resolve, win32 } from 'node:path'
import { searchPath } from './search-path.js'

/** What to spawn on Windows for an agent's file and argv, without cmd.exe ever reading the task. */
export interface WindowsCommand {
  file: string
  args: string[]
}

/** The agent is a batch file that is not an npm shim: running it would hand the task to cmd.exe. */
export class UnsafeBatchFile extends Error {
  constructor(path: string) {
    super(
      `${path} is a batch file that is not an npm shim: it can only run through cmd.exe, which would interpret the task`
    )
    this.name = 'UnsafeBatchFile'
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path, constants.F_OK)
    return true
  } catch {
    return false
  }
}

/**
 * Where `name` is: a path as given, or each PATH directory, each tried with each PATHEXT extension (libuv tries only
 * .com and .exe, which is why a bare `claude` installed by npm, a `claude.cmd`, is not found by spawn). Never the
 * working directory first, as Windows itself would: that is the caller's `cwd`, where a `claude.cmd` of anyone's making
 * would run instead of the agent.
 */
export async function findWindowsExecutable(
  name: string,
  path: string,
  pathext: string,
  cwd: string
): Promise<string | undefined> {
  // Lower case: Windows' file systems ignore case, and an npm shim is written `claude.cmd`.
  const extensions = extname(name) === '' ? pathext.toLowerCase().split(';').filter(Boolean) : ['']
  const bases = isAbsolute(name) || win32.isAbsolute(name) || /[\\/]/.test(name)
    ? [resolve(cwd, name)]
    : path.split(';').filter(Boolean).map((dir) => join(dir, name))
  for (const base of bases) {
    for (const extension of extensions) {
      if (await exists(base + extension)) return base + extension
    }
  }
  return undefined
}

/**
 * npm's cmd-shim (npm/cmd-shim) writes one of two lines: `"%_prog%" <args> "%dp0%\<target>" %*`, where _prog is
 * node.exe beside the shim if there is one and else the program named in `SET "_prog=…"`; or `"%dp0%\<target>" %*`
 * for a target that runs by itself. Reading that line tells what the shim would start, so it can be started directly.
 */
export function parseNpmCmdShim(
  content: string
): { program: string | null; programArgs: string[]; target: string } | null {
  const viaProgram = /"%_prog%"\s*(.*?)\s*"%dp0%\\([^"]+)"\s+%\*/.exec(content)
  if (viaProgram !== null) {
    const fallback = /\)\s*ELSE\s*\(\s*SET "_prog=([^"]+)"/i.exec(content)
    return {
      program: fallback?.[1] ?? 'node',
      programArgs: viaProgram[1]!.split(/\s+/).filter(Boolean),
      target: viaProgram[2]!
    }
  }
  const direct = /"%(?:~dp0|dp0%)\\([^"]+)"\s+%\*/.exec(content)
  return direct === null ? null : { program: null, programArgs: [], target: direct[1]! }
}

/**
 * The file to spawn for an agent on Windows: an executable as it is; an npm .cmd shim resolved to its target (node and
 * the script, or the native binary), so the task goes to CreateProcess as an argument and never through cmd.exe, whose
 * parsing of `%VAR%`, `^`, `&`, `|`, `!` and `"` no quoting fully tames. undefined when there is nothing to run.
 */
export async function resolveWindowsCommand(
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  cwd: string
): Promise<WindowsCommand | undefined> {
  const found = await findWindowsExecutable(file, searchPath(env), env['PATHEXT'] ?? '.COM;.EXE;.BAT;.CMD', cwd)
  if (found === undefined) return undefined
  if (!/\.(cmd|bat)$/i.test(found)) return { file: found, args }
  const shim = parseNpmCmdShim(await readFile(found, 'utf8'))
  if (shim === null) throw new UnsafeBatchFile(found)
  const target = join(dirname(found), shim.target)
  if (shim.program === null) return { file: target, args }
  const besideShim = join(dirname(found), 'node.exe')
  const program = shim.program === 'node' && (await exists(besideShim)) ? besideShim : shim.program
  return { file: program, args: [...shim.programArgs, target, ...args] }
}
