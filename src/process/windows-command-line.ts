/**
 * Windows has no argv: a process gets one command line, and each program splits it by its own rules. Node (libuv's
 * `quote_cmd_arg`) joins argv into that line with MSVCRT-style quoting; these functions say exactly what it will build,
 * so the service can refuse what a Windows program would read differently, or what Windows cannot carry.
 */

/** The longest command line CreateProcess accepts, in UTF-16 code units, without its terminating NUL. */
export const WINDOWS_COMMAND_LINE_MAX = 32_766

/**
 * One argument as libuv quotes it: bare when it needs nothing, else in quotes with `"` and the backslashes before one
 * escaped.
 */
export function quoteWindowsArg(arg: string): string {
  if (arg === '') return '""'
  if (!/[ \t"]/.test(arg)) return arg
  if (!/["\\]/.test(arg)) return `"${arg}"`
  let quoted = '"'
  let backslashes = 0
  for (const char of arg) {
    if (char === '\\') {
      backslashes++
      continue
    }
    // Backslashes are literal unless a quote follows them: then each is doubled, and the quote escaped.
    quoted += char === '"' ? '\\'.repeat(backslashes * 2 + 1) + '"' : '\\'.repeat(backslashes) + char
    backslashes = 0
  }
  // Before the closing quote, trailing backslashes are doubled too.
  return `${quoted}${'\\'.repeat(backslashes * 2)}"`
}

/** The command line a spawn of `file` with `args` hands to Windows (argv[0] is the file, as Node passes it). */
export function windowsCommandLine(file: string, args: readonly string[]): string {
  return [file, ...args].map(quoteWindowsArg).join(' ')
}
