//! A2A 0.3 clients on the JSON-RPC binding, translated at the edge (spec §11 of
//! `a2a-protocol.md`, "Changes from 0.3.0 to 1.0"): a 0.3 request is turned into the
//! same [`Operation`] and 1.0 request message every other binding produces, and the 1.0
//! result, stream event or card is turned back into its 0.3 shape. Nothing here touches
//! the handler, the store or a task's lifecycle: these are pure functions on
//! [`serde_json::Value`].
//!
//! - this file: the method table ([`operation`], [`method_name`]) and which dialect a
//!   request speaks ([`dialect`]);
//! - [`request`]: 0.3 params → 1.0 request message;
//! - [`response`]: 1.0 result / stream event / agent card → 0.3 shape.
//!
//! | 0.3 method | Operation |
//! |---|---|
//! | `message/send` | SendMessage |
//! | `message/stream` | SendStreamingMessage |
//! | `tasks/get` | GetTask |
//! | `tasks/cancel` | CancelTask |
//! | `tasks/resubscribe` | SubscribeToTask |
//! | `tasks/pushNotificationConfig/set` | CreateTaskPushNotificationConfig |
//! | `tasks/pushNotificationConfig/get` | GetTaskPushNotificationConfig |
//! | `tasks/pushNotificationConfig/list` | ListTaskPushNotificationConfigs |
//! | `tasks/pushNotificationConfig/delete` | DeleteTaskPushNotificationConfig |
//! | `agent/getAuthenticatedExtendedCard` | GetExtendedAgentCard |
//!
//! ListTasks has no 0.3 method.

pub mod request;
pub mod response;

use super::operations::{Operation, ProtocolVersion};

/// The 0.3 JSON-RPC method names and the operation each one is.
const METHODS: [(&str, Operation); 10] = [
    ("message/send", Operation::SendMessage),
    ("message/stream", Operation::SendStreamingMessage),
    ("tasks/get", Operation::GetTask),
    ("tasks/cancel", Operation::CancelTask),
    ("tasks/resubscribe", Operation::SubscribeToTask),
    (
        "tasks/pushNotificationConfig/set",
        Operation::CreateTaskPushNotificationConfig,
    ),
    (
        "tasks/pushNotificationConfig/get",
        Operation::GetTaskPushNotificationConfig,
    ),
    (
        "tasks/pushNotificationConfig/list",
        Operation::ListTaskPushNotificationConfigs,
    ),
    (
        "tasks/pushNotificationConfig/delete",
        Operation::DeleteTaskPushNotificationConfig,
    ),
    (
        "agent/getAuthenticatedExtendedCard",
        Operation::GetExtendedAgentCard,
    ),
];

/// The operation a 0.3 JSON-RPC method name stands for (exact spelling), if any.
pub fn operation(method: &str) -> Option<Operation> {
    METHODS
        .iter()
        .find(|(name, _)| *name == method)
        .map(|&(_, op)| op)
}

/// The 0.3 JSON-RPC method name of `op`; `None` for ListTasks (new in 1.0).
pub fn method_name(op: Operation) -> Option<&'static str> {
    METHODS
        .iter()
        .find(|(_, o)| *o == op)
        .map(|&(name, _)| name)
}

/// How one JSON-RPC request is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// A 1.0 method name: 1.0 shapes in and out.
    V1_0(Operation),
    /// A 0.3 method name: translated in and out by this module.
    V0_3(Operation),
    /// Neither, or a 0.3 name under an explicit `A2A-Version: 1.0`: -32601.
    Unknown,
}

/// Decides how a request for `method` with the negotiated `version` (`None`: no
/// `A2A-Version` sent) is served. The method name decides the shapes, because it is
/// unambiguous: a 0.3 name is served as 0.3 with `A2A-Version: 0.3` or without a
/// version (the spec reads a missing version as 0.3); a 1.0 name is served as 1.0 with
/// or without a version, and also under `A2A-Version: 0.3` (clients that copied the
/// spec's `0.3` header examples still send 1.0 bodies). A 0.3 name under an explicit
/// `A2A-Version: 1.0` is [`Dialect::Unknown`]: in 1.0 that method does not exist.
pub fn dialect(method: &str, version: Option<ProtocolVersion>) -> Dialect {
    if let Some(op) = Operation::from_name(method) {
        return Dialect::V1_0(op);
    }
    match (operation(method), version) {
        (Some(op), None | Some(ProtocolVersion::V0_3)) => Dialect::V0_3(op),
        _ => Dialect::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_table_round_trips() {
        for op in Operation::ALL {
            match method_name(op) {
                Some(name) => assert_eq!(operation(name), Some(op), "{name}"),
                None => assert_eq!(op, Operation::ListTasks),
            }
        }
        for bad in [
            "SendMessage",
            "message/Send",
            "tasks/list",
            "",
            "message/send ",
        ] {
            assert_eq!(operation(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_method_name_decides_the_dialect() {
        use ProtocolVersion::*;
        let send = Operation::SendMessage;
        assert_eq!(dialect("message/send", None), Dialect::V0_3(send));
        assert_eq!(dialect("message/send", Some(V0_3)), Dialect::V0_3(send));
        assert_eq!(dialect("message/send", Some(V1_0)), Dialect::Unknown);
        assert_eq!(dialect("SendMessage", None), Dialect::V1_0(send));
        assert_eq!(dialect("SendMessage", Some(V0_3)), Dialect::V1_0(send));
        assert_eq!(dialect("SendMessage", Some(V1_0)), Dialect::V1_0(send));
        assert_eq!(dialect("tasks/list", None), Dialect::Unknown);
        assert_eq!(dialect("nope", Some(V0_3)), Dialect::Unknown);
    }
}
