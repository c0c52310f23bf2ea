import { userInfo } from 'node:os'
import type { SudoReport, SudoStatus } from '../schemas/run.js'
import type { SudoContext } from './probe.js'

/** What the user reads when the agent's sudo needed a password: what happened and the ways out, in French. */
function sudoPasswordMessage(context: SudoContext, serviceUser: string): string {
  const where =
    context.kind === 'host'
      ? `l’utilisateur « ${context.user?.name ?? serviceUser} » sur l’hôte`
      : `${context.user === undefined ? 'l’utilisateur par défaut' : `l’utilisateur « ${context.user} »`} ` +
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
export function sudoReport(status: SudoStatus, passwordNeeded: boolean, context: SudoContext): SudoReport {
  return {
    status,
    password_needed: passwordNeeded,
    message: passwordNeeded ? sudoPasswordMessage(context, userInfo().username) : null
  }
}
