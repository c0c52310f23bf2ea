import t from 'tap'
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
