import { userInfo } from 'node:os'
import type { SudoReport, SudoStatus } from '../schemas/run.js'
import type { SudoContext } from './probe.js'

/**
 * What the user reads when the agent's sudo needed a password: what happened and the ways out, in French. The user
 * named is the one the agent ran as: AGENT_USER or the service's own on the host; inside WSL `wsl_user`, else the
 * distro's default user as the shim saw it (`askedUser`).
 */
function sudoPasswordMessage(context: SudoContext, serviceUser: string, askedUser: string | undefined): string {
  const wslUser = context.kind === 'wsl' ? context.user ?? askedUser : undefined
  const where =
    context.kind === 'host'
      ? `l’utilisateur « ${context.user?.name ?? serviceUser} » sur l’hôte`
      : `${wslUser === undefined ? 'l’utilisateur par défaut' : `l’utilisateur « ${wslUser} »`} ` +
        `dans la distribution WSL « ${context.distro} »`
  return (
    `L’agent a tenté d’utiliser sudo, mais sudo demande un mot de passe pour ${where}. ` +
    'Aucun mot de passe n’est saisi ni stocké par agent-runner : la commande a échoué aussitôt. ' +
    'Pour que l’agent puisse utiliser sudo, autorisez sudo sans mot de passe pour cet utilisateur ' +
    '(une règle NOPASSWD dans /etc/sudoers.d/, par exemple « utilisateur ALL=(ALL) NOPASSWD: ALL » ' +
    'ou limitée aux commandes nécessaires), ' +
    'ou reformulez la tâche pour qu’elle n’ait pas besoin de sudo.'
  )
}

/** The result's `sudo`: what the probe found before the run, and whether the agent then met a password prompt. */
export function sudoReport(
  status: SudoStatus,
  passwordNeeded: boolean,
  context: SudoContext,
  askedUser?: string
): SudoReport {
  return {
    status,
    password_needed: passwordNeeded,
    message: passwordNeeded ? sudoPasswordMessage(context, userInfo().username, askedUser) : null
  }
}
