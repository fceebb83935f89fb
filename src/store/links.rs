//! [`StoreUpstreamLinks`]: a task store as the executor API's durable
//! [`UpstreamLinks`] (the request handler hands it to its executor).

use std::sync::Arc;

use async_trait::async_trait;

use super::TaskStore;
use crate::executor::{LinkError, UpstreamLink, UpstreamLinks};
use crate::scope::Scope;

/// The upstream links of a [`TaskStore`] ([`TaskStore::put_upstream_link`],
/// [`TaskStore::upstream_link`]).
#[derive(Clone)]
pub struct StoreUpstreamLinks(pub Arc<dyn TaskStore>);

impl std::fmt::Debug for StoreUpstreamLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreUpstreamLinks")
    }
}

#[async_trait]
impl UpstreamLinks for StoreUpstreamLinks {
    async fn put_link(
        &self,
        scope: &Scope,
        task_id: &str,
        link: &UpstreamLink,
    ) -> Result<(), LinkError> {
        self.0
            .put_upstream_link(scope, task_id, link)
            .await
            .map_err(|e| LinkError(e.to_string()))
    }

    async fn link(&self, scope: &Scope, task_id: &str) -> Result<Option<UpstreamLink>, LinkError> {
        self.0
            .upstream_link(scope, task_id)
            .await
            .map_err(|e| LinkError(e.to_string()))
    }
}
