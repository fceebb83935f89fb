//! Task, TaskStatus, TaskState, Message, Role and Artifact (A2A spec §4.1).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::Metadata;
use super::part::Part;
use super::time::{self, Timestamp};

macro_rules! proto_enum {
    (
        $(#[$meta:meta])*
        $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $num:literal, $proto:literal, [$($alias:literal),*] ; )* }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
        }

        impl $name {
            /// The ProtoJSON spelling (the proto enum value name).
            pub fn as_str(self) -> &'static str {
                match self { $( Self::$variant => $proto, )* }
            }

            /// The proto enum number.
            pub fn number(self) -> i32 {
                match self { $( Self::$variant => $num, )* }
            }

            /// Parses the proto name, a 0.3 spelling, or the proto number written as text.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $( $proto $(| $alias)* => Some(Self::$variant), )*
                    other => other.parse::<i64>().ok().and_then(Self::from_number),
                }
            }

            /// The value for a proto enum number.
            pub fn from_number(n: i64) -> Option<Self> {
                match n {
                    $( $num => Some(Self::$variant), )*
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let v = Value::deserialize(d)?;
                let parsed = match &v {
                    Value::String(s) => Self::parse(s),
                    Value::Number(n) => n.as_i64().and_then(Self::from_number),
                    _ => None,
                };
                parsed.ok_or_else(|| serde::de::Error::custom(format!(
                    concat!("invalid ", stringify!($name), " value {}"), v
                )))
            }
        }
    };
}

proto_enum! {
    /// The lifecycle state of a task (spec §4.1.3). Terminal: COMPLETED, FAILED,
    /// CANCELED, REJECTED. Interrupted: INPUT_REQUIRED, AUTH_REQUIRED.
    TaskState {
        /// Unset; never emitted. As a ListTasks filter it means "any state".
        Unspecified = 0, "TASK_STATE_UNSPECIFIED", ["unknown"];
        /// Accepted, not yet started.
        Submitted = 1, "TASK_STATE_SUBMITTED", ["submitted"];
        /// Being processed.
        Working = 2, "TASK_STATE_WORKING", ["working"];
        /// Finished successfully (terminal).
        Completed = 3, "TASK_STATE_COMPLETED", ["completed"];
        /// Finished with an error (terminal).
        Failed = 4, "TASK_STATE_FAILED", ["failed"];
        /// Canceled by a client (terminal).
        Canceled = 5, "TASK_STATE_CANCELED", ["canceled", "TASK_STATE_CANCELLED"];
        /// Waiting for the client to send more input (interrupted).
        InputRequired = 6, "TASK_STATE_INPUT_REQUIRED", ["input-required"];
        /// The agent refused the task (terminal).
        Rejected = 7, "TASK_STATE_REJECTED", ["rejected"];
        /// Waiting for authorization, usually out of band (interrupted).
        AuthRequired = 8, "TASK_STATE_AUTH_REQUIRED", ["auth-required"];
    }
}

impl TaskState {
    /// COMPLETED, FAILED, CANCELED or REJECTED: no further transitions are allowed.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Canceled | Self::Rejected
        )
    }

    /// INPUT_REQUIRED or AUTH_REQUIRED: the agent waits on the client.
    pub fn is_interrupted(self) -> bool {
        matches!(self, Self::InputRequired | Self::AuthRequired)
    }

    /// Terminal or interrupted: where a blocking SendMessage returns.
    pub fn is_settled(self) -> bool {
        self.is_terminal() || self.is_interrupted()
    }
}

proto_enum! {
    /// Who sent a message (spec §4.1.5).
    Role {
        /// Unset; rejected on input.
        Unspecified = 0, "ROLE_UNSPECIFIED", [];
        /// Client to server.
        User = 1, "ROLE_USER", ["user"];
        /// Server to client.
        Agent = 2, "ROLE_AGENT", ["agent"];
    }
}

/// A task's status: its state, an optional agent message explaining it, and when it
/// was set (spec §4.1.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// The agent's status message, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// When the state was set (UTC, millisecond precision).
    #[serde(
        default,
        with = "time::opt_millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub timestamp: Option<Timestamp>,
}

impl TaskStatus {
    /// A status with `state`, no message, stamped now.
    pub fn new(state: TaskState) -> Self {
        Self {
            state,
            message: None,
            timestamp: Some(time::now()),
        }
    }

    /// A status with `state` and an agent message, stamped now.
    pub fn with_message(state: TaskState, message: Message) -> Self {
        Self {
            state,
            message: Some(message),
            timestamp: Some(time::now()),
        }
    }
}

/// The unit of work (spec §4.1.1). `id` is generated by the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Server-generated unique id.
    pub id: String,
    /// Groups related tasks and messages.
    #[serde(default, alias = "context_id")]
    pub context_id: String,
    /// Current status.
    pub status: TaskStatus,
    /// Outputs. `None` is emitted as an absent key (ListTasks without `includeArtifacts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<Artifact>>,
    /// Messages exchanged, oldest first. `None` (e.g. `historyLength: 0`) is omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Message>>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Task {
    /// The artifacts, or an empty slice.
    pub fn artifacts(&self) -> &[Artifact] {
        self.artifacts.as_deref().unwrap_or(&[])
    }

    /// The history, or an empty slice.
    pub fn history(&self) -> &[Message] {
        self.history.as_deref().unwrap_or(&[])
    }

    /// Applies `historyLength` (spec §3.2.4): `None` keeps all, `0` omits the field,
    /// `n` keeps the `n` most recent messages.
    pub fn apply_history_length(&mut self, history_length: Option<u32>) {
        match history_length {
            None => {}
            Some(0) => self.history = None,
            Some(n) => {
                if let Some(h) = self.history.as_mut() {
                    let n = n as usize;
                    if h.len() > n {
                        h.drain(..h.len() - n);
                    }
                }
            }
        }
    }
}

/// One message between client and agent (spec §4.1.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Creator-generated id.
    #[serde(alias = "message_id")]
    pub message_id: String,
    /// The context the message belongs to.
    #[serde(default, alias = "context_id", skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// The task the message belongs to, if any.
    #[serde(default, alias = "task_id", skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Sender.
    pub role: Role,
    /// Content; at least one part.
    pub parts: Vec<Part>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Extension URIs this message uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// Tasks this message refers to.
    #[serde(
        default,
        alias = "reference_task_ids",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reference_task_ids: Vec<String>,
}

/// An output of a task (spec §4.1.7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Unique within the task.
    #[serde(alias = "artifact_id")]
    pub artifact_id: String,
    /// Human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Content.
    pub parts: Vec<Part>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Extension URIs this artifact uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}
