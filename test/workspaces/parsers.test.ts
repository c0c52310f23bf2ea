import { once } from 'node:events'
import t from 'tap'
import { changedFiles, truncatedDiff } from '#src/workspaces/changeset.js'
import { parseAuthor } from '#src/workspaces/commit.js'
import { parseNumstat, parseRaw, ZFields } from '#src/workspaces/z-output.js'
import { filterDrivers, gitInvocation, HARDENING, neutralFilters } from '#src/workspaces/git.js'

// The pure parts of the git layer: what every call is given, and how a config listing is read.

t.test('every call: hardening -c options, then -C, then the command; nothing of the service\'s environment', (t) => {
  const saved = process.env['GIT_DIR']
  process.env['GIT_DIR'] = '/somewhere/else'
  t.teardown(() => { if (saved === undefined) delete process.env['GIT_DIR']; else process.env['GIT_DIR'] = saved })
  const { args, env } = gitInvocation(['status'], {
    cwd: '/repo', safe: ['/repo'], env: { GIT_INDEX_FILE: '/repo/.git/x' }, config: [['filter.a=b.clean', '']]
  }, '/usr/bin:/bin')
  t.equal(args[0], '--no-pager')
  t.same(args.slice(-3), ['-C', '/repo', 'status'])
  for (const [key, value] of [...HARDENING, ['safe.directory', '/repo']]) {
    t.ok(args.includes(`${key}=${value}`), `${key}=${value}`)
  }
  t.match(env, {
    PATH: '/usr/bin:/bin',
    HOME: '/repo',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ATTR_NOSYSTEM: '1',
    GIT_ALLOW_PROTOCOL: '',
    GIT_INDEX_FILE: '/repo/.git/x',
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: 'filter.a=b.clean',
    GIT_CONFIG_VALUE_0: ''
  })
  t.notOk('GIT_DIR' in env)
  t.equal(gitInvocation([], { cwd: '/r', safe: [], home: '/h' }, '').env['HOME'], '/h')
  t.end()
})

t.test('filter drivers from a -z config listing, whatever their names hold', (t) => {
  t.same(filterDrivers(''), [])
  t.same(filterDrivers('filter.lfs.clean\0filter.lfs.smudge\0filter.lfs.required\0filter.a.b.process\0' +
    'filter.x=y\nz.clean\0diff.t.textconv\0'), ['lfs', 'a.b', 'x=y\nz'])
  t.same(neutralFilters(['x']), [
    ['filter.x.clean', ''], ['filter.x.smudge', ''], ['filter.x.process', ''], ['filter.x.required', 'false']
  ])
  t.end()
})

t.test('raw -z records: each status, renames with both paths, paths with newlines and tabs', (t) => {
  const sha = 'a'.repeat(40)
  t.same(parseRaw([
    `:000000 100644 ${'0'.repeat(40)} ${sha} A`, 'new\nline.txt',
    `:100644 100644 ${sha} ${sha} M`, 'tab\there',
    `:100644 000000 ${sha} ${'0'.repeat(40)} D`, 'gone',
    `:100644 100644 ${sha} ${sha} R087`, 'old name', 'new name',
    `:100644 100644 ${sha} ${sha} C100`, 'src', 'copy',
    `:100644 120000 ${sha} ${sha} T`, 'now-a-link'
  ]), [
    { status: 'added', path: 'new\nline.txt' },
    { status: 'modified', path: 'tab\there' },
    { status: 'deleted', path: 'gone' },
    { status: 'renamed', path: 'new name', oldPath: 'old name' },
    { status: 'added', path: 'copy' },
    { status: 'modified', path: 'now-a-link' }
  ])
  t.throws(() => parseRaw(['M']), /not a raw diff record/)
  t.throws(() => parseRaw([':1 1 a a M']), /cut short/)
  t.throws(() => parseRaw([':1 1 a a R100', 'old']), /cut short/)
  t.end()
})

t.test('numstat -z records: counts, binary files, renames', (t) => {
  t.same(parseNumstat(['3\t1\ta\nb', '-\t-\tbin', '0\t0\t', 'old', 'new']), [
    { path: 'a\nb', additions: 3, deletions: 1, binary: false },
    { path: 'bin', additions: 0, deletions: 0, binary: true },
    { path: 'new', oldPath: 'old', additions: 0, deletions: 0, binary: false }
  ])
  t.throws(() => parseNumstat(['x\ty\tz']), /not a numstat record/)
  t.throws(() => parseNumstat(['1\t1\t', 'old']), /cut short/)
  t.end()
})

t.test('raw and numstat zipped into the changeset\'s files; a mismatch is an error', (t) => {
  const header = `:100644 100644 ${'a'.repeat(40)} ${'b'.repeat(40)}`
  t.same(changedFiles([`${header} R100`, 'o', 'n', `${header} M`, 'm'], ['1\t2\t', 'o', 'n', '-\t-\tm']), [
    { path: 'n', status: 'renamed', old_path: 'o', additions: 1, deletions: 2, binary: false },
    { path: 'm', status: 'modified', additions: 0, deletions: 0, binary: true }
  ])
  t.throws(() => changedFiles([`${header} M`, 'm'], []), /different files/)
  t.throws(() => changedFiles([`${header} M`, 'm'], ['1\t1\tother']), /differ at other/)
  t.end()
})

t.test('a -z stream split into fields across chunks, bounded', async (t) => {
  const fields = new ZFields(1024)
  for (const chunk of ['ab', 'c\0d\ne', '\0', '\0x', 'y\0']) fields.write(Buffer.from(chunk))
  fields.end()
  await once(fields, 'finish')
  t.same(fields.fields, ['abc', 'd\ne', '', 'xy'])
  const unfinished = new ZFields(1024)
  unfinished.on('error', () => undefined)
  unfinished.end(Buffer.from('tail'))
  t.match(await once(unfinished, 'error'), [/does not end with NUL/])
  const bounded = new ZFields(4)
  bounded.on('error', () => undefined)
  bounded.write(Buffer.from('12345\0'))
  t.match(await once(bounded, 'error'), [/more than 4 bytes/])
})

t.test('a diff within its limit whole; beyond it, cut after its last complete line', (t) => {
  const diff = Buffer.from('line 1\nline 2\nline 3\n')
  t.same(truncatedDiff(diff, diff.length, 100), { diff: diff.toString(), diff_truncated: false })
  t.same(truncatedDiff(diff.subarray(0, 10), diff.length, 10), { diff: 'line 1\n', diff_truncated: true })
  t.same(truncatedDiff(Buffer.from('abcdef'), 99, 4), { diff: 'abcd', diff_truncated: true })
  t.end()
})

t.test('an author is Name <email>', (t) => {
  t.same(parseAuthor('agent-runner <agent-runner@example.com>'),
    { name: 'agent-runner', email: 'agent-runner@example.com' })
  t.same(parseAuthor('  Jane Q. Doe<jane@x> '), { name: 'Jane Q. Doe', email: 'jane@x' })
  for (const bad of ['', 'nobody', '<a@b>', 'a <b', 'a <b c>', 'a\nb <c>']) {
    t.throws(() => parseAuthor(bad), /not an author/)
  }
  t.end()
})
