//! The AgentCore runtime ARN and the invocation URLs derived from it.

use std::fmt;
use std::str::FromStr;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::{Deserialize, Serialize};

/// Bytes left as they are when the ARN goes into a URL path: the unreserved characters, like
/// Python's `urllib.parse.quote(arn, safe="")` which the AgentCore samples use. `:` and `/`
/// are encoded.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes `raw` for one URL path segment or query value (everything but
/// `A-Z a-z 0-9 - _ . ~`).
pub(crate) fn encode_component(raw: &str) -> String {
    utf8_percent_encode(raw, PATH_SEGMENT).to_string()
}

/// A checked AgentCore runtime ARN:
/// `arn:{aws|aws-cn|aws-us-gov}:bedrock-agentcore:{region}:{12-digit account}:runtime/{id}`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "String", into = "String")]
pub struct AgentRuntimeArn {
    raw: String,
    partition: String,
    region: String,
    account: String,
    runtime_id: String,
}

/// A string that is not an AgentCore runtime ARN; says which part is wrong.
#[derive(Debug, thiserror::Error)]
#[error(
    "{reason}; expected `arn:aws:bedrock-agentcore:REGION:ACCOUNT:runtime/ID` (12-digit account; partition aws, aws-cn or aws-us-gov), found {raw:?}"
)]
pub struct ArnError {
    reason: &'static str,
    raw: String,
}

impl AgentRuntimeArn {
    /// The ARN exactly as configured.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// The AWS partition: `aws`, `aws-cn` or `aws-us-gov`.
    pub fn partition(&self) -> &str {
        &self.partition
    }

    /// The AWS region, e.g. `us-east-1`.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The 12-digit AWS account id.
    pub fn account_id(&self) -> &str {
        &self.account
    }

    /// The runtime id, the part after `runtime/`.
    pub fn runtime_id(&self) -> &str {
        &self.runtime_id
    }

    /// The AgentCore data-plane origin for this ARN's region and partition, e.g.
    /// `https://bedrock-agentcore.us-east-1.amazonaws.com`.
    pub fn endpoint(&self) -> String {
        let domain = match self.partition.as_str() {
            "aws-cn" => "amazonaws.com.cn",
            _ => "amazonaws.com",
        };
        format!("https://bedrock-agentcore.{}.{domain}", self.region)
    }

    /// `{endpoint}/runtimes/{percent-encoded ARN}/{action}?qualifier={qualifier}`.
    pub(crate) fn action_url(&self, action: &str, qualifier: &str) -> String {
        format!(
            "{}/runtimes/{}/{action}?qualifier={}",
            self.endpoint(),
            encode_component(&self.raw),
            encode_component(qualifier)
        )
    }
}

impl FromStr for AgentRuntimeArn {
    type Err = ArnError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let fail = |reason| ArnError {
            reason,
            raw: raw.to_owned(),
        };
        let parts: Vec<&str> = raw.splitn(6, ':').collect();
        let [arn, partition, service, region, account, resource] = parts[..] else {
            return Err(fail("not an ARN"));
        };
        if arn != "arn" {
            return Err(fail("not an ARN"));
        }
        if !matches!(partition, "aws" | "aws-cn" | "aws-us-gov") {
            return Err(fail("unknown partition"));
        }
        if service != "bedrock-agentcore" {
            return Err(fail("not a bedrock-agentcore ARN"));
        }
        let region_ok = region.starts_with(|c: char| c.is_ascii_lowercase())
            && region.contains('-')
            && region
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !region_ok {
            return Err(fail("malformed region"));
        }
        if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
            return Err(fail("account id must be 12 digits"));
        }
        let Some(runtime_id) = resource.strip_prefix("runtime/") else {
            return Err(fail("resource must be `runtime/ID`"));
        };
        if runtime_id.is_empty()
            || !runtime_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(fail("runtime id must be letters, digits, `_` and `-`"));
        }
        Ok(AgentRuntimeArn {
            raw: raw.to_owned(),
            partition: partition.to_owned(),
            region: region.to_owned(),
            account: account.to_owned(),
            runtime_id: runtime_id.to_owned(),
        })
    }
}

impl TryFrom<String> for AgentRuntimeArn {
    type Error = ArnError;

    fn try_from(raw: String) -> Result<Self, Self::Error> {
        raw.parse()
    }
}

impl From<AgentRuntimeArn> for String {
    fn from(arn: AgentRuntimeArn) -> String {
        arn.raw
    }
}

impl fmt::Display for AgentRuntimeArn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}
