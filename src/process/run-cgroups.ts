import { mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { mkdir, rmdir, writeFile } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'

/** What one run may use: its processes (threads count), its memory. */
export interface RunLimits {
  processes: number
  memoryBytes: number
  /** false: AGENT_LIMITS=rlimits, no cgroup per run even where the host gives one. */
  cgroups?: boolean
}

/** Which limit a run crossed, as its stop_reason says. */
export type LimitReached = 'process_limit' | 'memory_limit'

type Controller = 'pids' | 'memory' | 'cpu'

/** Where this host gives the service cgroups to put runs in: v2's one tree, or v1's tree per controller. */
export interface CgroupLayout {
  version: 1 | 2
  /** The directory runs are made under, per controller (v2: one, under every key). */
  parents: Record<Controller, string | undefined>
}

interface MountLine {
  root: string
  point: string
  type: string
  options: string[]
}

/** /proc/self/mountinfo's cgroup mounts: `id parent major:minor root point options … - type source super`. */
function cgroupMounts(mountinfo: string): MountLine[] {
  return mountinfo.split('\n').flatMap((line) => {
    const [left, right] = line.split(' - ')
    if (left === undefined || right === undefined) return []
    const fields = left.split(' ')
    const [type, , superOptions] = right.split(' ')
    if (type !== 'cgroup' && type !== 'cgroup2') return []
    return [{ root: fields[3]!, point: fields[4]!, type, options: (superOptions ?? '').split(',') }]
  })
}

/** /proc/self/cgroup: `id:controllers:path`, v2's line with no controllers. */
function ownCgroups(text: string): Array<{ controllers: string[]; path: string }> {
  return text.split('\n').filter(Boolean).map((line) => {
    const [, controllers = '', ...path] = line.split(':')
    return { controllers: controllers === '' ? [] : controllers.split(','), path: path.join(':') }
  })
}

/** Where the service's own cgroup of a mount is, as a directory. */
const directoryOf = (mount: MountLine, path: string): string =>
  join(mount.point, mount.root !== '/' && path.startsWith(mount.root) ? path.slice(mount.root.length) : path)

/**
 * Where runs can have cgroups of their own, pure: v1 where the pids and memory controllers are mounted (cpu too when
 * it is), under the service's own cgroup; v2 where the service's own cgroup already hands pids and memory to its
 * children (a delegated subtree, or the root). The reason when neither: what /readyz says.
 */
export function cgroupLayout(
  mountinfo: string,
  self: string,
  readSubtree: (dir: string) => string | undefined,
  service: string
): CgroupLayout | string {
  const mounts = cgroupMounts(mountinfo)
  const own = ownCgroups(self)
  const v1 = (controller: Controller): string | undefined => {
    const mount = mounts.find((each) => each.type === 'cgroup' && each.options.includes(controller))
    const line = own.find((each) => each.controllers.includes(controller))
    return mount === undefined || line === undefined ? undefined : join(directoryOf(mount, line.path), service)
  }
  if (v1('pids') !== undefined && v1('memory') !== undefined) {
    return { version: 1, parents: { pids: v1('pids'), memory: v1('memory'), cpu: v1('cpu') } }
  }
  const unified = mounts.find((each) => each.type === 'cgroup2')
  const line = own.find((each) => each.controllers.length === 0)
  if (unified === undefined || line === undefined) return 'no pids and memory cgroup controllers on this host'
  const base = directoryOf(unified, line.path)
  const delegated = (readSubtree(base) ?? '').split(/\s+/)
  if (!delegated.includes('pids') || !delegated.includes('memory')) {
    return `cgroup v2: ${base} does not hand pids and memory to its children (a cgroup delegated to the service ` +
      'does, e.g. systemd\'s Delegate=yes)'
  }
  const parent = join(base, service)
  return { version: 2, parents: { pids: parent, memory: parent, cpu: delegated.includes('cpu') ? parent : undefined } }
}

const readText = (path: string): string => {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return ''
  }
}

/** Removes an empty cgroup: true once it is gone (EBUSY while a process is still leaving it). */
function removed(dir: string): boolean {
  try {
    rmdirSync(dir)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT'
  }
}

/** A counter of a cgroup's events file (`max 3`, `oom_kill 1`); 0 when absent. */
export function eventCount(text: string, name: string): number {
  return Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? 0)
}

/**
 * Makes the directory runs' cgroups go under, at start: the service's own, one level below its cgroup (v2: handing
 * the controllers on to the runs). Throws when the host does not let it (not root, a read-only mount).
 */
function prepareCgroups(layout: CgroupLayout): void {
  for (const parent of new Set(Object.values(layout.parents).filter((dir) => dir !== undefined))) {
    mkdirSync(parent, { recursive: true })
  }
  if (layout.version === 2) {
    const controllers = ['pids', 'memory', ...(layout.parents.cpu === undefined ? [] : ['cpu'])]
    writeFileSync(join(layout.parents.pids!, 'cgroup.subtree_control'), controllers.map((name) => `+${name}`).join(' '))
  }
}

/** One run's cgroup: where its processes are put, what it may use, whether it crossed a limit, and its end. */
export class RunCgroup {
  readonly #layout: CgroupLayout
  readonly #dirs: Partial<Record<Controller, string>>

  private constructor(layout: CgroupLayout, runId: string) {
    this.#layout = layout
    this.#dirs = {}
    for (const controller of ['pids', 'memory', 'cpu'] as const) {
      const parent = layout.parents[controller]
      if (parent !== undefined) this.#dirs[controller] = join(parent, runId)
    }
  }

  /** A new run's cgroup, with its limits. */
  static create(layout: CgroupLayout, runId: string, limits: RunLimits): RunCgroup {
    const cgroup = new RunCgroup(layout, runId)
    for (const dir of cgroup.#each()) mkdirSync(dir)
    for (const [file, value] of cgroup.#limitFiles(limits)) writeFileSync(file, value)
    return cgroup
  }

  /**
   * The same, made off the event loop: a cgroup's mkdir waits for the kernel's one cgroup lock, which other cgroups
   * being made and removed hold (here, short runs at c=4: 0.26 ms a run at the median, 7 ms at p90, 40 ms at worst,
   * every request of the service held up meanwhile).
   */
  static async made(layout: CgroupLayout, runId: string, limits: RunLimits): Promise<RunCgroup> {
    const cgroup = new RunCgroup(layout, runId)
    await Promise.all([...cgroup.#each()].map((dir) => mkdir(dir)))
    await Promise.all(cgroup.#limitFiles(limits).map(([file, value]) => writeFile(file, value)))
    return cgroup
  }

  /** Where its limits are written, and what. */
  #limitFiles(limits: RunLimits): Array<[string, string]> {
    const memory = this.#layout.version === 1 ? 'memory.limit_in_bytes' : 'memory.max'
    return [
      [join(this.#dirs.pids!, 'pids.max'), String(limits.processes)],
      [join(this.#dirs.memory!, memory), String(limits.memoryBytes)],
      // Without swap to spill into, the limit is the memory it may touch (v1 would need swap accounting for it).
      ...(this.#layout.version === 2 ? [[join(this.#dirs.memory!, 'memory.swap.max'), '0'] as [string, string]] : [])
    ]
  }

  /** The cgroup a run of an earlier life of the service left. */
  static existing(layout: CgroupLayout, runId: string): RunCgroup {
    return new RunCgroup(layout, runId)
  }

  #each(): Set<string> {
    return new Set(Object.values(this.#dirs))
  }

  /** Where a process is written to join the run's cgroup, in every hierarchy. */
  procsFiles(): string[] {
    return [...this.#each()].map((dir) => join(dir, 'cgroup.procs'))
  }

  /**
   * Puts a process (the agent, just spawned) in the run's cgroup, in every hierarchy: false when it could not (gone
   * already: it failed at once).
   */
  enter(pid: number): boolean {
    for (const file of this.procsFiles()) {
      try {
        writeFileSync(file, String(pid))
      } catch {
        return false
      }
    }
    return true
  }

  /** The limit the run crossed, if it did: a fork refused at pids.max, or a process killed at the memory limit. */
  reached(): LimitReached | null {
    if (eventCount(readText(join(this.#dirs.pids!, 'pids.events')), 'max') > 0) return 'process_limit'
    const memoryEvents = this.#layout.version === 1 ? 'memory.oom_control' : 'memory.events'
    if (eventCount(readText(join(this.#dirs.memory!, memoryEvents)), 'oom_kill') > 0) return 'memory_limit'
    return null
  }

  /** The processes still in it. */
  processes(): number[] {
    return readText(join(this.#dirs.pids!, 'cgroup.procs')).split('\n').filter(Boolean).map(Number)
  }

  /**
   * Ends every process in it, then removes it: v2's cgroup.kill in one write; v1 by the pids it lists, in rounds (a
   * pid listed in the cgroup is in the run, so no stranger is signalled). Resolves once none is left, which is what the
   * run's slot waits for; its directories go after that, off the run's path (removeLater). Never throws.
   */
  async end(): Promise<void> {
    for (let round = 0; round < 50; round++) {
      const left = this.processes()
      if (left.length === 0) break
      if (this.#layout.version === 2) {
        try {
          writeFileSync(join(this.#dirs.pids!, 'cgroup.kill'), '1')
        } catch {
          // before Linux 5.14: by pid below
        }
      }
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // gone meanwhile
        }
      }
      await sleep(20)
    }
    removeLater(this.#each())
  }
}

/** Run cgroups emptied and still to remove: what the service's close removes if their turn has not come. */
const removing = new Set<string>()

/**
 * Removes an emptied run's directories in the background: in v1 an rmdir per controller cost the event loop ~0.2 ms
 * each (a tenth of the service's CPU for short runs, bench/findings.md), and a process just killed may still be on
 * its way out (EBUSY: a few tries, 20 ms apart) — neither is anything a caller waits for once no process is left.
 */
function removeLater(dirs: Set<string>): void {
  for (const dir of dirs) {
    removing.add(dir)
    void (async () => {
      for (let attempt = 0; attempt < 50 && !(await removedNow(dir)); attempt++) await sleep(20)
      removing.delete(dir)
    })()
  }
}

/** Removes an empty cgroup off the event loop: true once it is gone. */
async function removedNow(dir: string): Promise<boolean> {
  try {
    await rmdir(dir)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT'
  }
}

/** What a killed service left in its runs' cgroups: ended and removed at the next start. Returns how many processes. */
async function endLeftoverCgroups(layout: CgroupLayout): Promise<number> {
  let ended = 0
  const parent = layout.parents.pids!
  let runs: string[] = []
  try {
    runs = readdirSync(parent, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name)
  } catch {
    return 0
  }
  for (const run of runs) {
    const left = RunCgroup.existing(layout, run)
    ended += left.processes().length
    await left.end()
  }
  return ended
}

/**
 * The cgroups this host gives runs, ready (their parent made, a killed life's leftovers ended), or why there are
 * none: Linux, the service as root, and the controllers mounted where the service can write.
 */
export async function hostCgroups(
  service: string,
  limits: RunLimits | undefined
): Promise<{ layout: CgroupLayout; leftovers: number; limits: string } | { reason: string }> {
  if (limits === undefined) return { reason: 'none: AGENT_LIMITS=off' }
  if (limits.cgroups === false) return { reason: 'none: AGENT_LIMITS=rlimits' }
  if (process.platform !== 'linux') return { reason: `none: no cgroups on ${process.platform}` }
  if (process.getuid?.() !== 0) return { reason: 'none: the service is not root, and cannot make cgroups for its runs' }
  const layout = cgroupLayout(
    readText('/proc/self/mountinfo'),
    readText('/proc/self/cgroup'),
    (dir) => readText(join(dir, 'cgroup.subtree_control')),
    `agent-runner-${service}`
  )
  if (typeof layout === 'string') return { reason: `none: ${layout}` }
  try {
    prepareCgroups(layout)
  } catch (error) {
    return { reason: `none: the runs' cgroups cannot be made (${(error as Error).message})` }
  }
  const leftovers = await endLeftoverCgroups(layout)
  const cpu = layout.parents.cpu === undefined ? '' : ', a CPU share beside the service\'s'
  const memory = `${String(Math.round(limits.memoryBytes / 1_048_576))} MiB of memory`
  const bounds = `${String(limits.processes)} processes and ${memory} per run${cpu}`
  return { layout, leftovers, limits: `${bounds} (cgroup v${String(layout.version)})` }
}

/** The runs' parent cgroups, removed when the service closes (each run's own went with it, or goes now). */
export function removeCgroups(layout: CgroupLayout): void {
  for (const dir of removing) if (removed(dir)) removing.delete(dir)
  for (const parent of new Set(Object.values(layout.parents).filter((dir) => dir !== undefined))) {
    try {
      rmdirSync(parent)
    } catch {
      // a run's cgroup still busy: the next start ends it
    }
  }
}
