//! Compaction of etcd's history while a replica leads (a replicated store
//! that runs for months).
//!
//! etcd keeps every revision of every key until it is told to forget them. Each
//! commit of the manager rewrites the meta key, so without compaction etcd's history
//! grows by one meta value (and the flows written) per transaction, and etcd refuses
//! every write once its database reaches its quota (2 GB by default) — on a busy
//! cluster within a day. The leader therefore compacts, as Kubernetes' API server
//! does: every period it compacts up to the revision it saw one period earlier, so
//! readers and watchers always have at least one period of history. Compaction is
//! etcd-wide, not per prefix; when etcd is compacted by someone else (its
//! `--auto-compaction-retention`, another owner), turn this off (`--etcd-compact 0s`).

use std::time::Duration;

use etcd_client::{CompactionOptions, GetOptions};

use super::EtcdStore;
use crate::manager::store::api::StoreError;

impl EtcdStore {
    /// etcd's current revision.
    pub async fn revision(&self) -> Result<i64, StoreError> {
        let mut kv = self.client.kv_client();
        let r = kv
            .get(self.keys.meta(), Some(GetOptions::new().with_count_only()))
            .await
            .map_err(self.etcd())?;
        Ok(r.header().map_or(0, |h| h.revision()))
    }

    /// Forgets the history older than `revision` (the values at `revision` and after
    /// stay readable). A revision already compacted by someone else is no error.
    pub async fn compact(&self, revision: i64) -> Result<(), StoreError> {
        let mut kv = self.client.kv_client();
        match kv
            .compact(revision, Some(CompactionOptions::new().with_physical()))
            .await
        {
            Ok(_) => Ok(()),
            Err(e)
                if e.to_string()
                    .contains("required revision has been compacted") =>
            {
                Ok(())
            }
            Err(e) => Err(self.etcd()(e)),
        }
    }
}

/// Compacts `store` every `every`, up to the revision seen one period before; runs
/// until dropped (the term's end aborts it).
pub async fn compactor(store: EtcdStore, every: Duration) {
    let mut seen: Option<i64> = None;
    loop {
        tokio::time::sleep(every).await;
        if let Some(rev) = seen {
            match store.compact(rev).await {
                Ok(()) => tracing::debug!(revision = rev, "compacted etcd's history"),
                Err(e) => tracing::warn!(error = %e, "cannot compact etcd's history"),
            }
        }
        seen = store.revision().await.ok();
    }
}
