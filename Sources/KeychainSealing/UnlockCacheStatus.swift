import Foundation

/// Where one unlock is kept for this user's later processes on this machine, as `keystone doctor` reports it.
package enum UnlockCacheStatus: Sendable, Equatable {
    /// The Linux kernel user keyring works here.
    case kernelKeyring
    /// The kernel keyring is refused (a container's seccomp profile) and the unlock agent answers at `socket`.
    case agent(socket: String, pid: Int32)
    /// The kernel keyring is refused and no agent runs: `keystone unlock-keychain` starts one at `socket`.
    case agentOnDemand(socket: String)
    /// Nothing keeps an unlock: each process must unlock for itself. `reason` says why and what fixes it.
    case none(reason: String)

    /// The status of this process's environment.
    package static var current: UnlockCacheStatus {
        if KeyringCache.isAvailable { return .kernelKeyring }
        guard let client = UnlockAgentClient.configured else {
            return .none(reason: "the kernel keyring is refused here and the unlock agent is turned off (KEYSTONE_AGENT=0): unset KEYSTONE_AGENT so that `keystone unlock-keychain` starts it")
        }
        do {
            return .agent(socket: client.location.socket, pid: try client.ping())
        } catch {
            switch error.kind {
            case .unsafeDirectory, .unusable: return .none(reason: "the kernel keyring is refused here and the unlock agent cannot run: \(error.reason)")
            default: return .agentOnDemand(socket: client.location.socket)
            }
        }
    }

    /// Whether one unlock serves later processes now (or will, as soon as `unlock-keychain` starts the agent).
    package var isShared: Bool {
        if case .none = self { return false }
        return true
    }

    /// One sentence for a report.
    package var summary: String {
        switch self {
        case .kernelKeyring:
            "the kernel keyring is available: one unlock serves later commands"
        case .agent(let socket, let pid):
            "the kernel keyring is refused here (a container's seccomp profile?); the unlock agent (pid \(pid), \(socket)) keeps unlocks for later commands"
        case .agentOnDemand(let socket):
            "the kernel keyring is refused here (a container's seccomp profile?); `keystone unlock-keychain` starts the unlock agent (\(socket)) so that one unlock serves later commands"
        case .none(let reason):
            reason + "; until then every process must unlock the keychain itself"
        }
    }
}
