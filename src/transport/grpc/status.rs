//! Errors as gRPC statuses (spec §10.6): the code from the one error table in
//! [`crate::error`] ([`A2aError::grpc_status`]), the client-facing message, and a
//! `google.rpc.Status` in `grpc-status-details-bin` whose details hold one
//! `google.rpc.ErrorInfo` (reason, domain `a2a-protocol.org`, metadata such as
//! `taskId`), as `tonic-types` encodes it.

use std::collections::HashMap;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::error::{A2aError, ERROR_DOMAIN};

/// The ErrorInfo reason of a refused authentication (as on the HTTP bindings' 401).
pub const UNAUTHENTICATED_REASON: &str = "UNAUTHENTICATED";

/// The gRPC code named `name` (`NOT_FOUND`, `FAILED_PRECONDITION`, ...); `UNKNOWN` for a
/// name that is not one of the sixteen.
pub fn code_from_name(name: &str) -> Code {
    match name {
        "OK" => Code::Ok,
        "CANCELLED" => Code::Cancelled,
        "UNKNOWN" => Code::Unknown,
        "INVALID_ARGUMENT" => Code::InvalidArgument,
        "DEADLINE_EXCEEDED" => Code::DeadlineExceeded,
        "NOT_FOUND" => Code::NotFound,
        "ALREADY_EXISTS" => Code::AlreadyExists,
        "PERMISSION_DENIED" => Code::PermissionDenied,
        "RESOURCE_EXHAUSTED" => Code::ResourceExhausted,
        "FAILED_PRECONDITION" => Code::FailedPrecondition,
        "ABORTED" => Code::Aborted,
        "OUT_OF_RANGE" => Code::OutOfRange,
        "UNIMPLEMENTED" => Code::Unimplemented,
        "INTERNAL" => Code::Internal,
        "UNAVAILABLE" => Code::Unavailable,
        "DATA_LOSS" => Code::DataLoss,
        "UNAUTHENTICATED" => Code::Unauthenticated,
        _ => Code::Unknown,
    }
}

/// The ErrorInfo metadata of `err` (string values, e.g. `taskId`).
fn metadata(err: &A2aError) -> HashMap<String, String> {
    let details = err.details();
    details
        .get(0)
        .and_then(|info| info.get("metadata"))
        .and_then(|m| m.as_object())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The status a client receives for `err`.
pub fn from_error(err: &A2aError) -> Status {
    let details = ErrorDetails::with_error_info(err.reason(), ERROR_DOMAIN, metadata(err));
    Status::with_error_details(code_from_name(err.grpc_status()), err.to_string(), details)
}

/// `UNAUTHENTICATED` for a call without an accepted `authorization: Bearer <key>`.
pub fn unauthenticated() -> Status {
    refused(crate::identity::AuthFailure::Missing)
}

/// The status of a refused credential: `UNAUTHENTICATED` (none, or not accepted) or
/// `PERMISSION_DENIED` (a missing scope, a tenant the credential does not allow), with the
/// ErrorInfo reason of the same name (metadata `check`: which check failed) and the
/// `www-authenticate` challenge of the HTTP bindings in the trailers; `UNAVAILABLE`
/// without a challenge when the credential could not be checked yet.
pub fn refused(failure: crate::identity::AuthFailure) -> Status {
    let reason = failure.status_name();
    let details = ErrorDetails::with_error_info(
        reason,
        ERROR_DOMAIN,
        HashMap::from([("check".to_owned(), failure.reason().to_owned())]),
    );
    let code = code_from_name(reason);
    let mut status = Status::with_error_details(code, failure.message(), details);
    if !failure.is_unavailable()
        && let Ok(v) = failure.challenge_header().to_str()
        && let Ok(v) = v.parse()
    {
        status.metadata_mut().insert("www-authenticate", v);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::TaskState;

    fn every_error() -> Vec<A2aError> {
        let s = || "x".to_owned();
        vec![
            A2aError::ParseError(s()),
            A2aError::InvalidRequest(s()),
            A2aError::MethodNotFound(s()),
            A2aError::InvalidParams(s()),
            A2aError::Internal(s()),
            A2aError::Unavailable(s()),
            A2aError::TaskNotFound(s()),
            A2aError::PushConfigNotFound {
                task_id: s(),
                id: s(),
            },
            A2aError::TaskNotCancelable {
                task_id: s(),
                state: TaskState::Completed,
            },
            A2aError::PushNotificationNotSupported,
            A2aError::UnsupportedOperation(s()),
            A2aError::ContentTypeNotSupported(s()),
            A2aError::InvalidAgentResponse(s()),
            A2aError::ExtendedAgentCardNotConfigured,
            A2aError::ExtensionSupportRequired(s()),
            A2aError::VersionNotSupported(s()),
        ]
    }

    #[test]
    fn every_error_has_its_code_and_error_info() {
        for err in every_error() {
            let status = from_error(&err);
            assert_ne!(status.code(), Code::Unknown, "{err:?}");
            assert_eq!(status.code(), code_from_name(err.grpc_status()));
            assert_eq!(status.message(), err.to_string());
            let info = status.get_details_error_info().expect("ErrorInfo detail");
            assert_eq!(info.reason, err.reason());
            assert_eq!(info.domain, ERROR_DOMAIN);
        }
    }

    #[test]
    fn task_errors_carry_the_task_id() {
        let status = from_error(&A2aError::TaskNotFound("t-9".into()));
        assert_eq!(status.code(), Code::NotFound);
        let info = status.get_details_error_info().unwrap();
        assert_eq!(info.metadata.get("taskId").map(String::as_str), Some("t-9"));
    }

    #[test]
    fn names_map_to_codes() {
        assert_eq!(
            code_from_name("FAILED_PRECONDITION"),
            Code::FailedPrecondition
        );
        assert_eq!(code_from_name("UNAUTHENTICATED"), Code::Unauthenticated);
        assert_eq!(code_from_name("nonsense"), Code::Unknown);
        let status = unauthenticated();
        assert_eq!(status.code(), Code::Unauthenticated);
        assert_eq!(
            status.get_details_error_info().unwrap().reason,
            UNAUTHENTICATED_REASON
        );
    }
}
