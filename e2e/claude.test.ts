import t from 'tap'
import { asRoot, realSudoInstalled } from '../test/helpers/users.js'
import { proveClaudeDenials, provePromises, REAL_CLIS } from './real-cli.js'

// The real claude CLI through the service, offline against a scripted model server (test/helpers/model-servers/).
const skip = !asRoot ? 'needs root (useradd, sudoers, AGENT_USER)' : !realSudoInstalled && 'needs the sudo package'
t.test('claude', { skip }, async (t) => {
  provePromises(t, REAL_CLIS.claude)
  proveClaudeDenials(t)
})
