import { execFile } from 'node:child_process'
import type { Containment, StopSignal } from './containment.js'
import { AgentSpawnError } from './spawn-error.js'
import { resolveWindowsCommand, UnsafeBatchFile } from './windows-executable.js'

/**
 * Ends a process tree the way Windows offers: taskkill walks the tree by parent process id. Without /F it asks
 * (windows get WM_CLOSE; console programs cannot be asked); with /F it terminates.
 */
function taskkill(taskkillBin: string, pid: number, force: boolean): Promise<void> {
  const args = ['/PID', String(pid), '/T', ...(force ? ['/F'] : [])]
  return new Promise((resolve) => {
    // "not found" once the tree is gone is what was wanted: the answer is not read.
    execFile(taskkillBin, args, { windowsHide: true, timeout: 30_000 }, () => resolve())
  })
}

/**
 * Native Windows: no process groups and no signals (Node's kill() is TerminateProcess of the direct child only), so
 * stopping a run is taskkill of the agent's whole tree, asked first, then forced. A process whose parent has already
 * exited can no longer be reached through the tree: what the agent leaves behind when it exits by itself is not swept
 * (WSL runs, or a Linux host, give that guarantee).
 */
export function windowsTree(taskkillBin = 'taskkill'): Containment {
  return {
    mode: 'windows-tree',
    launch: async (file, args, { env, cwd }) => {
      let resolved
      try {
        resolved = await resolveWindowsCommand(file, args, env, cwd ?? process.cwd())
      } catch (error) {
        if (!(error instanceof UnsafeBatchFile)) throw error
        throw new AgentSpawnError(Object.assign(error, { code: 'EINVAL' }))
      }
      if (resolved === undefined) throw AgentSpawnError.notFound(file)
      return { ...resolved, detached: false }
    },
    control: (child) => {
      const pid = child.pid!
      return {
        leftover: { kind: 'windows-tree', pid },
        signal: (signal: StopSignal) => taskkill(taskkillBin, pid, signal === 'SIGKILL'),
        sweep: async () => {},
        exit: (exitCode, signal) => ({ exitCode, signal })
      }
    }
  }
}
