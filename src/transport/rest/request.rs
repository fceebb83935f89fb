//! From an HTTP+JSON request to an [`Operation`] and its request message in ProtoJSON
//! (spec §11.3): the route and method pick the operation, the path fills `tenant`,
//! `id` and `taskId`, and the body (POST) or the query string (GET, DELETE) the rest.
//!
//! Only the binding's encoding is handled here; whether the values are valid (a page
//! size in range, a known state, an id that exists) is the handler's to decide.

use std::collections::HashMap;

use axum::http::Method;
use serde_json::{Map, Value};

use super::query;
use crate::error::A2aError;
use crate::protocol::value_count::{self, MAX_REQUEST_VALUES};
use crate::transport::operations::Operation;

/// A route of the binding, relative to the interface URL and to an optional `/{tenant}`
/// prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST /message:send`.
    Send,
    /// `POST /message:stream`.
    Stream,
    /// `GET /tasks`.
    Tasks,
    /// `/tasks/{id}`: `GET` is GetTask; `POST …:cancel` CancelTask; `GET|POST
    /// …:subscribe` SubscribeToTask (the suffix is part of the `{id}` segment).
    Task,
    /// `GET|POST /tasks/{id}/pushNotificationConfigs`.
    PushConfigs,
    /// `GET|DELETE /tasks/{id}/pushNotificationConfigs/{configId}`.
    PushConfig,
    /// `GET /extendedAgentCard`.
    ExtendedCard,
}

/// Why a request on the `/tasks/{id}` route names no operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misroute {
    /// The path exists but not for this method: the methods it answers (the `Allow`
    /// header of a 405).
    Method(&'static str),
    /// A `POST /tasks/{id}:verb` whose verb is neither `cancel` nor `subscribe` (a typo
    /// such as `:cancle`): 404, not a 405 about the method.
    UnknownVerb,
}

const CANCEL: &str = ":cancel";
const SUBSCRIBE: &str = ":subscribe";

/// The operation `method` on `route` names, and the task id with any `:cancel` or
/// `:subscribe` suffix removed (`None` for routes without an `{id}`). `HEAD` is read as
/// `GET` (the answer's body is dropped by the server).
///
/// # Errors
/// [`Misroute::Method`] when the path exists but not for `method` (`GET …:cancel`,
/// `DELETE /tasks/{id}`, a `POST /tasks/{id}` without a suffix); [`Misroute::UnknownVerb`]
/// for a `POST` whose `:verb` suffix is unknown.
pub fn operation(
    route: Route,
    method: &Method,
    id: Option<&str>,
) -> Result<(Operation, Option<String>), Misroute> {
    let id = id.map(str::to_owned);
    let get = *method == Method::GET || *method == Method::HEAD;
    let post = *method == Method::POST;
    let op = match route {
        Route::Send => Operation::SendMessage,
        Route::Stream => Operation::SendStreamingMessage,
        Route::Tasks => Operation::ListTasks,
        Route::ExtendedCard => Operation::GetExtendedAgentCard,
        Route::PushConfigs if get => Operation::ListTaskPushNotificationConfigs,
        Route::PushConfigs => Operation::CreateTaskPushNotificationConfig,
        Route::PushConfig if get => Operation::GetTaskPushNotificationConfig,
        Route::PushConfig => Operation::DeleteTaskPushNotificationConfig,
        Route::Task => {
            let raw = id.unwrap_or_default();
            if let Some(task) = raw.strip_suffix(SUBSCRIBE) {
                return if get || post {
                    Ok((Operation::SubscribeToTask, Some(task.to_owned())))
                } else {
                    Err(Misroute::Method("GET, HEAD, POST"))
                };
            }
            if let Some(task) = raw.strip_suffix(CANCEL) {
                return if post {
                    Ok((Operation::CancelTask, Some(task.to_owned())))
                } else {
                    Err(Misroute::Method("POST"))
                };
            }
            return if get {
                Ok((Operation::GetTask, Some(raw)))
            } else if post && raw.contains(':') {
                Err(Misroute::UnknownVerb)
            } else {
                Err(Misroute::Method("GET, HEAD"))
            };
        }
    };
    Ok((op, id))
}

/// Whether `op` reads its request message from the body (a POST route).
fn takes_body(op: Operation, method: &Method) -> bool {
    *method == Method::POST
        && matches!(
            op,
            Operation::SendMessage
                | Operation::SendStreamingMessage
                | Operation::CancelTask
                | Operation::SubscribeToTask
                | Operation::CreateTaskPushNotificationConfig
        )
}

fn body_object(body: &[u8]) -> Result<Map<String, Value>, A2aError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    value_count::check_json(body, MAX_REQUEST_VALUES)
        .map_err(|e| A2aError::InvalidParams(e.to_string()))?;
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(A2aError::InvalidParams(
            "the request body must be a JSON object (the request message)".into(),
        )),
        Err(e) => Err(A2aError::ParseError(e.to_string())),
    }
}

/// Sets `field` to the path's `value`; a body that names the same field with another
/// value is refused rather than silently overridden.
fn bind(msg: &mut Map<String, Value>, field: &str, value: &str) -> Result<(), A2aError> {
    match msg.get(field) {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == value => {}
        Some(Value::String(s)) if field == "tenant" && s.is_empty() => {}
        Some(_) => {
            return Err(A2aError::InvalidParams(format!(
                "{field} in the request body differs from the one in the path"
            )));
        }
    }
    msg.insert(field.to_owned(), Value::String(value.to_owned()));
    Ok(())
}

/// The request message of `op` in ProtoJSON: `body` (POST) or `query` (GET and
/// DELETE) plus the path parameters (`tenant`, and the task id as `id` or, for the
/// push-config operations, `taskId` with the config id as `id`).
///
/// # Errors
/// `ParseError` for a body that is not JSON; `InvalidParams` for a body that is not an
/// object or carries more than [`MAX_REQUEST_VALUES`] values, a field that contradicts the path, or a query parameter `op` does not take
/// or of the wrong type ([`query::parse`]).
pub fn message(
    op: Operation,
    method: &Method,
    path: &HashMap<String, String>,
    task_id: Option<&str>,
    query: Option<&str>,
    body: &[u8],
) -> Result<Value, A2aError> {
    // The operations read from a body take no query fields (`A2A-Version` alone is
    // allowed), so the query is checked either way.
    let fields = query::parse(op, query)?;
    let mut msg = if takes_body(op, method) {
        body_object(body)?
    } else {
        fields
    };
    if let Some(tenant) = path.get("tenant") {
        bind(&mut msg, "tenant", tenant)?;
    }
    if let Some(task) = task_id {
        match path.get("config_id") {
            Some(config) => {
                bind(&mut msg, "taskId", task)?;
                bind(&mut msg, "id", config)?;
            }
            None if matches!(
                op,
                Operation::CreateTaskPushNotificationConfig
                    | Operation::ListTaskPushNotificationConfigs
            ) =>
            {
                bind(&mut msg, "taskId", task)?
            }
            None => bind(&mut msg, "id", task)?,
        }
    }
    Ok(Value::Object(msg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn suffixes_pick_the_operation() {
        let get = Method::GET;
        let post = Method::POST;
        let op = |m: &Method, id: &str| operation(Route::Task, m, Some(id));
        assert_eq!(op(&get, "t1"), Ok((Operation::GetTask, Some("t1".into()))));
        assert_eq!(
            op(&get, "t1:subscribe"),
            Ok((Operation::SubscribeToTask, Some("t1".into())))
        );
        assert_eq!(
            op(&post, "t1:subscribe"),
            Ok((Operation::SubscribeToTask, Some("t1".into())))
        );
        assert_eq!(
            op(&post, "t1:cancel"),
            Ok((Operation::CancelTask, Some("t1".into())))
        );
        assert_eq!(op(&get, "t1:cancel"), Err(Misroute::Method("POST")));
        assert_eq!(op(&post, "t1"), Err(Misroute::Method("GET, HEAD")));
        assert_eq!(
            op(&Method::HEAD, "t1"),
            Ok((Operation::GetTask, Some("t1".into())))
        );
        assert_eq!(
            op(&Method::DELETE, "t1"),
            Err(Misroute::Method("GET, HEAD"))
        );
        assert_eq!(
            op(&Method::PUT, "t1:subscribe"),
            Err(Misroute::Method("GET, HEAD, POST"))
        );
        assert_eq!(op(&post, "t1:cancle"), Err(Misroute::UnknownVerb));
        assert_eq!(
            op(&get, "t1:cancle"),
            Ok((Operation::GetTask, Some("t1:cancle".into())))
        );
    }

    #[test]
    fn path_fields_fill_the_message() {
        let m = message(
            Operation::SendMessage,
            &Method::POST,
            &path(&[("tenant", "acme")]),
            None,
            None,
            br#"{"message":{"messageId":"m"}}"#,
        )
        .unwrap();
        assert_eq!(m, json!({"message":{"messageId":"m"},"tenant":"acme"}));

        let m = message(
            Operation::GetTaskPushNotificationConfig,
            &Method::GET,
            &path(&[("id", "t"), ("config_id", "c")]),
            Some("t"),
            None,
            b"",
        )
        .unwrap();
        assert_eq!(m, json!({"taskId":"t","id":"c"}));

        let m = message(
            Operation::CancelTask,
            &Method::POST,
            &path(&[]),
            Some("t"),
            None,
            br#"{"id":"t","metadata":{"k":1}}"#,
        )
        .unwrap();
        assert_eq!(m, json!({"id":"t","metadata":{"k":1}}));
    }

    #[test]
    fn contradictions_and_bad_bodies_are_refused() {
        let err = |body: &[u8], q: Option<&str>| {
            message(
                Operation::CancelTask,
                &Method::POST,
                &path(&[("tenant", "a")]),
                Some("t"),
                q,
                body,
            )
            .unwrap_err()
            .jsonrpc_code()
        };
        assert_eq!(err(br#"{"id":"other"}"#, None), -32602);
        assert_eq!(err(br#"{"tenant":"b"}"#, None), -32602);
        assert_eq!(err(br#"[1]"#, None), -32602);
        assert_eq!(err(br#"{"id":"#, None), -32700);
        assert_eq!(err(b"{}", Some("historyLength=1")), -32602);
    }
}
