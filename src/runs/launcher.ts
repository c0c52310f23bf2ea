import type { FastifyBaseLogger } from 'fastify'
import type { ToolName } from '../agents/catalog.js'
import type { AgentTool } from '../agents/tools.js'
import { serviceError, type ServiceError } from '../errors.js'
import type { OutputSink } from '../process/agent-process.js'
import type { AgentUser } from '../process/agent-user.js'
import type { Containment } from '../process/containment.js'
import type { RunLedger } from '../process/ledger.js'
import type { TokenIdentity, TokenUsers } from '../process/token-users.js'
import type { WslDistros } from '../process/wsl-distros.js'
import type { ModelPrices, RunLimits } from '../schemas/limits.js'
import type { RunParams, RunResult } from '../schemas/run.js'
import type { SlotLease, SlotLimiter } from '../slots/limiter.js'
import type { QueueRefusal, SlotQueue } from '../slots/queue.js'
import type { SudoProbe } from '../sudo/probe.js'
import type { SudoShim } from '../sudo/shim.js'
import { webhookRefusal, type WebhookSettings } from '../webhooks/policy.js'
import { runPlacedAgent, type AgentRunParts, type RunBudget } from './agent-run.js'
import type { StepsThread } from './steps-thread.js'
import { outputCheck, type CheckAnswer } from './output-schema.js'
import { placedIn, placeRun, type Placement } from './placement.js'
import { stopRefusal, type Run } from './run.js'
import { continuedPlace, sessionLeftBy } from './sessions.js'
import type { RunWorktrees, WorktreePlan } from './run-worktree.js'
import {
  SPEND_WINDOW_MS, type SessionRecord, type SessionStore, type SessionWorktree, type SpendLedger
} from './stores/run-store.js'
import { assertRunnableOnWindows } from './windows-checks.js'
import { assertHostDirectory } from './workspace.js'

/** What of the service's configuration a launch reads. */
interface LaunchSettings {
  hostPlatform: NodeJS.Platform
  wslBin: string
  /** Agents' directory when a run names none (and its token has no home of its own). */
  agentWorkdir: string
  /** AGENT_USER: every token's agents' user, without AGENT_USERS. */
  agentUser: AgentUser | undefined
  killGraceMs: number
  outputLimitBytes: number
  /** What models cost, where a CLI says nothing of it (MODEL_PRICES_FILE). */
  modelPrices: ModelPrices
  /** Dollars each named token's runs may cost over any 24 hours (TOKEN_DAILY_COST_USD). */
  dailyCostUsd: Record<string, number>
}

export interface LauncherDeps {
  settings: LaunchSettings
  tools: Record<ToolName, AgentTool>
  slots: Pick<SlotLimiter, 'limit' | 'adopt'>
  /** Where runs wait for a slot (`queue_timeout`), and take one. */
  queue: Pick<SlotQueue, 'acquire'>
  sudoProbe: SudoProbe
  sudoShim: SudoShim | undefined
  hostContainment: Containment
  ledger: RunLedger
  wslDistros: WslDistros
  sessions: SessionStore
  /** AGENT_USERS: each token's agents as a user of its own; absent, every token's are AGENT_USER (or the service). */
  tokenUsers: TokenUsers | undefined
  /** Who may ask for a webhook, and which URLs it may reach. */
  webhooks: Pick<WebhookSettings, 'secrets' | 'allow'>
  /** Worktree runs' worktrees, changesets and diffs. */
  worktrees: RunWorktrees
  /** What each token's runs cost over the last day. */
  spend: SpendLedger
  /** Where the built-in agents' steps are read off the relay's thread. */
  stepsThread?: StepsThread
  /** Where an answer is checked against its `output_schema`, off the service's thread. */
  checkAnswer: CheckAnswer
}

/** A run placed, its slot held: what its agent's part of the launch needs. */
interface PlacedRun {
  run: Run
  tool: AgentTool
  placement: Placement
  params: RunParams
  /** The session it continues. */
  session: string | undefined
  budget: RunBudget
}

/** A continued session stays claimed past its run's deadline by the stop's grace periods, and a margin. */
const CLAIM_MARGIN_MS = 60_000

/**
 * The one way a run of any kind goes from opened to its end: the agent accepts the task, the run is placed and the
 * place checked, a slot is taken, the agent runs and is watched, the slot goes back. Each step is a phase of the run
 * (run-phase.ts); whatever fails or stops it before its agent starts refuses it, with the caller's 4xx or 503.
 */
export class RunLauncher {
  readonly #deps: LauncherDeps
  readonly #parts: AgentRunParts

  constructor(deps: LauncherDeps) {
    this.#deps = deps
    const { ledger, sudoProbe, sudoShim, stepsThread, settings: { killGraceMs, outputLimitBytes } } = deps
    this.#parts = { ledger, sudoProbe, sudoShim, killGraceMs, outputLimitBytes, stepsThread }
  }

  /**
   * Takes the run to its end, which it tells: its result, or the refusal or failure this rejects with. `sink`: a live
   * reader that may fall behind (a stream's client).
   */
  async launch(run: Run, params: RunParams, log: FastifyBaseLogger, sink?: OutputSink): Promise<RunResult> {
    try {
      const tool = this.#deps.tools[run.tool]
      const output = outputCheck(params.task, params.output_schema, tool.spec.taskInArgv !== undefined,
        this.#deps.checkAnswer)
      const result = await output.checked(await this.#launch(run, params, output.prompt, log, sink))
      await this.#recordSpend(run, result, log)
      run.finish(result)
      return result
    } catch (error) {
      run.abort(error)
      throw error
    }
  }

  async #launch(
    run: Run, request: RunParams, prompt: string, log: FastifyBaseLogger, sink?: OutputSink
  ): Promise<RunResult> {
    // Admitted by a fleet's API replica, it holds its slot from the start: whatever refuses it here gives it back.
    const admitted = run.admittedWith === undefined ? undefined : await this.#adopted(run, run.admittedWith)
    try {
      return await this.#launchHolding(admitted, run, request, prompt, log, sink)
    } finally {
      admitted?.release()
    }
  }

  async #launchHolding(
    admitted: SlotLease | undefined, run: Run, request: RunParams, prompt: string, log: FastifyBaseLogger,
    sink?: OutputSink
  ): Promise<RunResult> {
    const { sessions } = this.#deps
    const tool = this.#deps.tools[run.tool]
    const model = this.#modelOf(tool, request.model)
    const budget = await this.#budgetOf(tool, request, run.caller, model)
    run.holdTo(model, budget.limits)
    if (request.webhook !== undefined) await this.#assertWebhook(run.caller, request.webhook.url)
    // An A2A push goes with its receiver's own credentials (no secret needed), to an address the same policy allows.
    if (run.push !== undefined) await this.#assertWebhook(run.caller, run.push.url, false)
    const session = request.resume
    const continued = session === undefined ? undefined : await this.#sessionOf(tool, run, session)
    const params = continued === undefined ? request : continuedPlace(request, continued)
    const identity = await this.#identityOf(run.caller, tool)
    const placement = this.#place(tool, params, run.id, { prompt, session, model, limits: budget.limits }, identity)
    await this.#assertPlaceable(placement, params)
    const worktree = await this.#deps.worktrees.plan(params, placement, continued)
    const claimed = session !== undefined &&
      await sessions.claimSession(run.tool, session, run.id, run.timeoutMs + CLAIM_MARGIN_MS)
    if (session !== undefined && !claimed) throw serviceError('SESSION_BUSY', session)
    try {
      run.advance('placed')
      run.advance('waiting_for_slot')
      const lease = admitted ?? await this.slotFor(run, params.queue_timeout ?? 0)
      try {
        run.advance('starting')
        if (worktree !== undefined) {
          return await this.#runInWorktree(worktree, { run, tool, placement, params, session, budget }, log, sink)
        }
        const result = await runPlacedAgent(run, tool, placement, budget, this.#parts, log, sink)
        return await this.#remember(result, { tool, run, params, resumed: session }, log)
      } finally {
        lease.release()
      }
    } finally {
      if (claimed) await sessions.releaseSession(run.tool, session, run.id).catch(() => undefined)
    }
  }

  /**
   * A slot of the run's tool: now, or within `queueTimeout` seconds, waiting its turn (its place told to its
   * followers). A run stopped while it waits never starts.
   */
  async slotFor(run: Run, queueTimeout: number): Promise<SlotLease> {
    const answer = await this.#deps.queue.acquire(run.tool, {
      waitMs: queueTimeout * 1000, stop: run, onPosition: (position) => run.queued(position)
    })
    if ('lease' in answer) return answer.lease
    throw this.#queueRefusal(run, answer.refused, queueTimeout)
  }

  /** The slot a fleet's API replica admitted the run with; gone (its TTL passed while nobody renewed it), a 503. */
  async #adopted(run: Run, holder: string): Promise<SlotLease> {
    const lease = await this.#deps.slots.adopt(run.tool, holder)
    if (lease === null) throw serviceError('SLOTS_UNAVAILABLE', 'the slot the run was admitted with has expired')
    return lease
  }

  #queueRefusal(run: Run, refusal: QueueRefusal, queueTimeout: number): ServiceError {
    const limit = this.#deps.slots.limit(run.tool)
    switch (refusal) {
      case 'full': return serviceError('AGENT_LIMIT_REACHED', limit)
      case 'queue_full': return serviceError('QUEUE_FULL', run.tool, this.#deps.tools[run.tool].settings.maxQueued)
      case 'timed_out': return serviceError('QUEUE_TIMED_OUT', queueTimeout, limit)
      case 'stopped': return serviceError(stopRefusal(run.stopReason!))
    }
  }

  /** A model the operator does not allow this tool is refused first, before anything is asked of anyone. */
  #modelOf(tool: AgentTool, requested: string | undefined): string | undefined {
    const model = tool.modelOf(requested)
    if (model === null) throw serviceError('MODEL_NOT_ALLOWED', requested!, tool.name, tool.settings.models)
    return model
  }

  /**
   * The run's limits (its own, its tool's ceilings) and its pricing; limits it cannot be held to are refused first,
   * before anything is asked of anyone.
   */
  async #budgetOf(tool: AgentTool, request: RunParams, caller: string, model: string | undefined): Promise<RunBudget> {
    const prices = this.#deps.settings.modelPrices
    const verdict = tool.limitsOf(request.limits, model, prices, await this.#dollarsLeft(caller))
    if ('limits' in verdict) return { limits: verdict.limits, pricing: { prices, model } }
    switch (verdict.refused) {
      case 'above_ceiling':
        throw serviceError('LIMIT_ABOVE_CEILING', verdict.limit, request.limits![verdict.limit]!, verdict.ceiling)
      case 'not_supported': throw serviceError('LIMIT_NOT_SUPPORTED', verdict.limit, tool.name)
      case 'cost_unknown': throw serviceError('COST_UNKNOWN', tool.name, model)
    }
  }

  /**
   * What the caller's daily ceiling leaves its next run, undefined without one; none left is a 429 before anything is
   * asked of anyone.
   */
  async #dollarsLeft(caller: string): Promise<number | undefined> {
    const { dailyCostUsd } = this.#deps.settings
    if (!Object.hasOwn(dailyCostUsd, caller)) return undefined
    const ceiling = dailyCostUsd[caller]!
    const spent = await this.#deps.spend.spentSince(caller, new Date(Date.now() - SPEND_WINDOW_MS))
    if (spent >= ceiling) throw serviceError('BUDGET_EXHAUSTED', caller, ceiling, spent)
    return ceiling - spent
  }

  /** What the run cost goes to its token's spend; a store that fails costs its daily ceiling that run, not the run. */
  async #recordSpend(run: Run, result: RunResult, log: FastifyBaseLogger): Promise<void> {
    const cost = result.usage?.cost_usd ?? null
    if (cost === null || cost <= 0) return
    await this.#deps.spend.record(run.caller, run.id, cost, new Date()).catch((error: unknown) => {
      log.warn({ err: error, cost_usd: cost }, 'the run’s cost could not be added to its token’s spend')
    })
  }

  /** An A2A push given to a run that runs already: refused as one given at its launch is. */
  async assertPushTarget(caller: string, url: string): Promise<void> {
    await this.#assertWebhook(caller, url, false)
  }

  /** A webhook the run could never deliver, or should never reach, is refused before anything else is done. */
  async #assertWebhook(caller: string, url: string, signed = true): Promise<void> {
    const refusal = await webhookRefusal(this.#deps.webhooks, caller, url, signed)
    if (refusal === null) return
    throw refusal.code === 'WEBHOOKS_NOT_CONFIGURED'
      ? serviceError('WEBHOOKS_NOT_CONFIGURED')
      : serviceError('WEBHOOK_URL_NOT_ALLOWED', refusal.reason)
  }

  /** The session `id` of this run's caller and tool; 400 for a CLI that cannot continue one, 404 for any other. */
  async #sessionOf(tool: AgentTool, run: Run, id: string): Promise<SessionRecord> {
    if (!tool.resumes) throw serviceError('RESUME_NOT_SUPPORTED', run.tool)
    // An id its CLI could not have issued (one kept by an older version) never reaches it.
    const session = tool.issues(id) ? await this.#deps.sessions.session(run.tool, id) : undefined
    // Another caller's session is no more there than an unknown one.
    if (session === undefined || session.caller !== run.caller) throw serviceError('SESSION_NOT_FOUND', id)
    return session
  }

  /**
   * The agent in a worktree of its own, made now that the run holds its slot; what it changed read back once it ends,
   * before the worktree goes or stays (for the session it left, or for good).
   */
  async #runInWorktree(
    plan: WorktreePlan,
    { run, tool, placement, params, session, budget }: PlacedRun,
    log: FastifyBaseLogger,
    sink: OutputSink | undefined
  ): Promise<RunResult> {
    const { worktrees } = this.#deps
    const open = await worktrees.open(plan, run).catch((error: unknown) => {
      log.warn({ err: error }, 'the run’s worktree could not be made')
      throw serviceError('WORKTREE_NOT_CREATED', (error as Error).message)
    })
    let result: RunResult
    try {
      const inWorktree = placedIn(placement, open.cwd)
      result = await runPlacedAgent(run, tool, inWorktree, budget, this.#parts, log, sink)
    } catch (error) {
      await worktrees.discard(open)
      throw error
    }
    const changes = await worktrees.changes(open, run)
    if (changes.error !== undefined) log.warn({ error: changes.error }, 'the run’s changes could not all be read back')
    const remembered = await this.#remember(
      { ...result, changes }, { tool, run, params, resumed: session, worktree: worktrees.sessionWorktree(open) }, log
    )
    const left = remembered.session_id === null ? null : { tool: run.tool, id: remembered.session_id }
    const kept = await worktrees.settle(open, left)
    return { ...remembered, changes: { ...changes, worktree: kept } }
  }

  /**
   * The session the run leaves, for its owner to continue: only an id its CLI could have issued (the resumed one's,
   * when it continued one) and that is no other caller's; the result names no other. A store that fails costs the
   * next resume, not this run.
   */
  async #remember(
    result: RunResult,
    { tool, run, params, resumed, worktree }: Omit<PlacedRun, 'placement' | 'session' | 'budget'> & {
      resumed: string | undefined
      worktree?: SessionWorktree
    },
    log: FastifyBaseLogger
  ): Promise<RunResult> {
    const id = tool.sessionLeft(result.session_id, resumed)
    if (id !== result.session_id) {
      log.warn({ resumed }, 'the agent reported a session id its CLI could not have given this run: not kept')
    }
    const session = sessionLeftBy(
      { ...result, session_id: id }, { tool: run.tool, caller: run.caller, params, worktree }
    )
    if (session === null) return { ...result, session_id: null }
    const kept = await this.#deps.sessions.saveSession(session).catch((error: unknown) => {
      log.warn({ err: error, session: session.id }, 'could not keep the run’s session: it cannot be continued')
      return true
    })
    if (!kept) log.warn('the agent reported a session id another caller’s run left: not kept')
    return kept ? result : { ...result, session_id: null }
  }

  /** The token's own user and home, made ready (its first run lays them); undefined without AGENT_USERS. */
  async #identityOf(caller: string, tool: AgentTool): Promise<TokenIdentity | undefined> {
    try {
      return await this.#deps.tokenUsers?.identityOf(caller)
    } catch (error) {
      throw serviceError('AGENT_SPAWN_FAILED', tool.spec.agent, (error as Error).message)
    }
  }

  #place(
    tool: AgentTool,
    params: RunParams,
    runId: string,
    { prompt, session, model, limits }: {
      prompt: string; session: string | undefined; model: string | undefined; limits?: RunLimits
    },
    identity: TokenIdentity | undefined
  ): Placement {
    const { settings, hostContainment } = this.#deps
    return placeRun({
      params,
      agentBin: tool.settings.bin,
      agent: tool.invocation(prompt, session, model, limits),
      hostPlatform: settings.hostPlatform,
      wslBin: settings.wslBin,
      hostContainment,
      env: tool.env,
      runId,
      defaultCwd: identity?.workdir ?? settings.agentWorkdir,
      user: identity?.user ?? settings.agentUser
    })
  }

  async #assertPlaceable(placement: Placement, params: RunParams): Promise<void> {
    if (this.#deps.settings.hostPlatform === 'win32') await assertRunnableOnWindows(placement, this.#deps.wslDistros)
    if (placement.where === 'host' && params.cwd !== undefined) await assertHostDirectory(params.cwd, placement.user)
  }
}
