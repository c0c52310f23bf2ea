import t from 'tap'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
// npm's own shim writer: the shims tested here are the ones `npm install -g` writes on Windows.
import cmdShim from 'cmd-shim'
import { buildAgentEnv } from '#src/agents/environment.js'
import { searchPath } from '#src/process/search-path.js'
import { quoteWindowsArg, windowsCommandLine } from '#src/process/windows-command-line.js'
import {
  findWindowsExecutable, parseNpmCmdShim, resolveWindowsCommand, UnsafeBatchFile
} from '#src/process/windows-executable.js'
import { windowsTree } from '#src/process/windows-tree.js'
import { tempDir, waitFor } from '../helpers/index.js'

// The Windows code paths that can be checked on any host; the Wine suite (npm run test:windows) runs them on Windows.

t.test('the command line Node builds on Windows (libuv quote_cmd_arg)', async (t) => {
  // libuv's own examples, from the comment above quote_cmd_arg.
  t.equal(quoteWindowsArg('hello"world'), '"hello\\"world"')
  t.equal(quoteWindowsArg('hello""world'), '"hello\\"\\"world"')
  t.equal(quoteWindowsArg('hello\\world'), 'hello\\world')
  t.equal(quoteWindowsArg('hello\\\\world'), 'hello\\\\world')
  t.equal(quoteWindowsArg('hello\\"world'), '"hello\\\\\\"world"')
  t.equal(quoteWindowsArg('hello\\\\"world'), '"hello\\\\\\\\\\"world"')
  t.equal(quoteWindowsArg('hello world\\'), '"hello world\\\\"')
  t.equal(quoteWindowsArg(''), '""')
  t.equal(quoteWindowsArg('a b'), '"a b"')
  t.equal(windowsCommandLine('wsl', ['-d', 'Ubuntu', '--exec', 'a b']), 'wsl -d Ubuntu --exec "a b"')
})

t.test('npm .cmd shims are read for what they start', async (t) => {
  const dir = tempDir(t)
  const script = join(dir, 'node_modules', 'agent', 'cli.js')
  const binary = join(dir, 'node_modules', 'agent', 'agent.exe')
  mkdirSync(join(dir, 'node_modules', 'agent'), { recursive: true })
  writeFileSync(script, '#!/usr/bin/env node\nconsole.log(process.argv)\n')
  writeFileSync(binary, 'MZ')
  await cmdShim(script, join(dir, 'claude'))
  await cmdShim(binary, join(dir, 'native'))

  t.same(parseNpmCmdShim(readFileSync(join(dir, 'claude.cmd'), 'utf8')), {
    program: 'node', programArgs: [], target: 'node_modules\\agent\\cli.js'
  })
  t.same(parseNpmCmdShim(readFileSync(join(dir, 'native.cmd'), 'utf8')), {
    program: null, programArgs: [], target: 'node_modules\\agent\\agent.exe'
  })
  t.equal(parseNpmCmdShim('@echo off\r\necho %*\r\n'), null, 'a hand-written batch file is no shim')

  const env = { PATH: `${join(dir, 'missing')};${dir}`, PATHEXT: '.COM;.EXE;.BAT;.CMD' }
  t.equal(
    await findWindowsExecutable('claude', env.PATH, env.PATHEXT, dir), join(dir, 'claude.cmd'),
    'PATHEXT finds the shim by its bare name'
  )
  t.equal(await findWindowsExecutable('nothing', env.PATH, env.PATHEXT, dir), undefined)
  // A request's cwd holding a claude.cmd of someone's making: PATH decides, never the directory the agent runs in.
  const requestCwd = join(dir, 'project')
  mkdirSync(requestCwd)
  writeFileSync(join(requestCwd, 'claude.cmd'), '@echo off\r\necho planted\r\n')
  t.equal(
    await findWindowsExecutable('claude', env.PATH, env.PATHEXT, requestCwd), join(dir, 'claude.cmd'),
    'the cwd is not searched'
  )
  writeFileSync(join(requestCwd, 'only-here.cmd'), '@echo off\r\n')
  t.equal(
    await findWindowsExecutable('only-here', env.PATH, env.PATHEXT, requestCwd), undefined,
    'what only the cwd holds is not found'
  )
  t.same(await resolveWindowsCommand('claude', ['-p', '%PATH% & echo'], env, dir), {
    file: 'node',
    args: [join(dir, 'node_modules\\agent\\cli.js'), '-p', '%PATH% & echo']
  }, 'node and the script: the task is an argument of node, never read by cmd.exe')
  writeFileSync(join(dir, 'node.exe'), 'MZ')
  t.equal(
    (await resolveWindowsCommand('claude', [], env, dir))!.file, join(dir, 'node.exe'),
    'node.exe beside the shim wins, as in the shim'
  )
  t.same(await resolveWindowsCommand('native', ['x'], env, dir), {
    file: join(dir, 'node_modules\\agent\\agent.exe'), args: ['x']
  })
  t.same(
    await resolveWindowsCommand(join(dir, 'node.exe'), ['x'], env, dir), { file: join(dir, 'node.exe'), args: ['x'] },
    'an .exe runs as it is'
  )
  writeFileSync(join(dir, 'plain.bat'), '@echo off\r\necho %*\r\n')
  await t.rejects(resolveWindowsCommand('plain', [], env, dir), UnsafeBatchFile)
  t.equal(await resolveWindowsCommand('nothing', [], env, dir), undefined)
})

t.test('windows-tree: stops are taskkill of the whole tree, asked first, then forced', async (t) => {
  const dir = tempDir(t)
  const log = join(dir, 'taskkill.log')
  const taskkill = join(dir, 'taskkill')
  writeFileSync(taskkill, `#!/bin/sh\necho "$*" >> ${log}\n`)
  chmodSync(taskkill, 0o755)
  const containment = windowsTree(taskkill)
  t.equal(containment.mode, 'windows-tree')
  const env = { PATH: `${dir};${process.env['PATH']!.replaceAll(':', ';')}`, PATHEXT: '.EXE' }
  await t.rejects(containment.launch('no-such-agent', [], { env, cwd: dir, runId: 'r' }), {
    name: 'AgentSpawnError', errno: 'ENOENT'
  })
  writeFileSync(join(dir, 'agent.cmd'), '@echo off\r\necho %*\r\n')
  await t.rejects(containment.launch('agent.cmd', [], { env, cwd: dir, runId: 'r' }), {
    name: 'AgentSpawnError', errno: 'EINVAL', message: /not an npm shim/
  })

  const child = spawn('sleep', ['5'], { stdio: 'ignore' })
  const run = containment.control(child, { file: 'sleep', args: ['5'], detached: false })
  t.same(run.leftover, { kind: 'windows-tree', pid: child.pid })
  await run.signal('SIGINT')
  await run.signal('SIGTERM')
  await run.signal('SIGKILL')
  await waitFor(() => readFileSync(log, 'utf8').split('\n').length === 4, 2000, 'three taskkill calls')
  t.same(readFileSync(log, 'utf8').trim().split('\n'), [
    `/PID ${child.pid} /T`, `/PID ${child.pid} /T`, `/PID ${child.pid} /T /F`
  ])
  t.same(run.exit(3, null), { exitCode: 3, signal: null })
  await run.sweep()
  child.kill()
  await once(child, 'exit')
})

t.test("Windows' variable names ignore case: PATH spelled Path passes, api_tokens never does", async (t) => {
  const rule = { allow: ['PATH', 'ANTHROPIC_*'], deny: ['REDIS_URL'] }
  const parent = { Path: 'C:\\Windows', anthropic_api_key: 'k', api_tokens: 's', Redis_Url: 'r' }
  t.same(buildAgentEnv(parent, rule, true), { Path: 'C:\\Windows', anthropic_api_key: 'k' })
  t.same(buildAgentEnv(parent, rule, false), {}, 'elsewhere names are exact')
  t.equal(searchPath({ Path: 'C:\\bin' }), 'C:\\bin')
  t.equal(searchPath({}), '')
})
