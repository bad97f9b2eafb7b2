//! The etcd writer of one leadership term (fenced, group-committed,
//! pipelined commits).
//!
//! Jobs queue up while transactions are in flight; when one of the `pipeline` slots
//! frees, every job waiting (up to etcd's transaction size) goes into one transaction:
//! group commit, so a busy leader makes few, large transactions. Each transaction is
//! guarded by the leader's election key and by the meta value the previous one wrote
//! (see [`super`]), and its jobs' completions run when it commits, in order.
//!
//! A transaction whose reply is lost or whose guard fails is *resolved* by reading
//! the election key and the meta key: if the meta key holds what this transaction (or
//! a later one of the pipeline) wrote, it committed; if it still holds what the
//! previous one wrote and the election key is this leader's, it did not (it was sent
//! ahead of its predecessor, or lost) and is sent again; anything else means the
//! leader was deposed. A deposed writer drops every job it holds — queued or in
//! flight: their requests are never acknowledged — says why and how many on `lost`,
//! and stops.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, TxnOpResponse, TxnResponse};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::codec::Fence;
use super::codec::{self, Keys, Meta};
use super::gather::Gather;
use super::groups::{FlowOp, Groups, KeyOp};
use crate::manager::state::DbOp;
use crate::manager::store::api::{Job, Store};
use crate::manager::store::check::Account;
use crate::manager::store::{schema, witness};

/// A term's writer: jobs go to its task. Dropping it lets the task finish the jobs
/// queued and stop.
pub struct EtcdWriter {
    tx: mpsc::UnboundedSender<Job>,
}

impl Store for EtcdWriter {
    fn submit(&self, job: Job) {
        // A writer that stopped (deposed) drops the job: its completion never runs,
        // and its request is answered as not done.
        let _ = self.tx.send(job);
    }
}

/// What the writer starts from.
pub(super) struct Setup {
    pub client: Client,
    /// A connection to etcd's Raft leader alone, for commits while it works.
    pub pinned: Option<Client>,
    pub keys: Keys,
    pub fence: Fence,
    /// The meta value the claim wrote.
    pub meta: Meta,
    pub meta_bytes: Vec<u8>,
    /// The flows' keys as the load found them.
    pub groups: Groups,
    pub witness: Option<witness::Witness>,
    pub max_ops: usize,
    pub pipeline: usize,
    pub gather: Duration,
    pub patience: Duration,
    pub lost: mpsc::UnboundedSender<String>,
    pub store: String,
}

/// Starts the writer task (inside a tokio runtime).
pub(super) fn spawn(setup: Setup) -> EtcdWriter {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(run(setup, rx));
    EtcdWriter { tx }
}

type Sent = JoinHandle<Result<TxnResponse, String>>;

/// One transaction of the pipeline.
struct Batch {
    jobs: Vec<Job>,
    txn: Txn,
    /// Flow deletes it holds (each must delete one key).
    deletes: usize,
    prev: Vec<u8>,
    next: Vec<u8>,
    meta: Meta,
    sent: Sent,
    attempts: u32,
}

/// How a transaction ended, once resolved.
enum Outcome {
    Committed,
    Resend,
    Lost(String),
}

/// Whether an error from etcd leaves the outcome unknown (the request may have been
/// applied) rather than being a refusal of the request itself.
fn uncertain(e: &etcd_client::Error) -> bool {
    use tonic::Code;
    match e {
        etcd_client::Error::GRpcStatus(s) => matches!(
            s.code(),
            Code::Unavailable
                | Code::DeadlineExceeded
                | Code::Cancelled
                | Code::Unknown
                | Code::Aborted
        ),
        _ => true,
    }
}

struct Writer {
    client: Client,
    /// Commits go here while it works (etcd's Raft leader when the term began: no
    /// forwarding hop); after its first failure, to `client`, which balances over
    /// every member that answers, for the rest of the term.
    pinned: Option<Client>,
    keys: Keys,
    fence: Fence,
    meta: Meta,
    meta_bytes: Vec<u8>,
    /// The flows' keys as the transactions made so far leave them.
    groups: Groups,
    witness: Option<witness::Witness>,
    witness_ok: bool,
    max_ops: usize,
    pipeline: usize,
    gather: Duration,
    patience: Duration,
    store: String,
}

impl Writer {
    /// The transaction for `jobs` after `prev` (the meta the one before leaves);
    /// an error if the books release a flow the store does not hold.
    fn batch(&mut self, jobs: Vec<Job>, prev: (&[u8], &Meta)) -> Result<Batch, String> {
        let mut meta = prev.1.clone();
        meta.seq += 1;
        let mut ops = Vec::new();
        let mut flows = Vec::new();
        let mut deletes = 0;
        let mut rows = meta.rows as i64;
        for j in &jobs {
            for op in &j.ops {
                match op {
                    DbOp::Insert(r) => {
                        flows.push(FlowOp::Insert(r));
                        rows += 1;
                        meta.digest = meta.digest.wrapping_add(schema::id_digest(r.id));
                    }
                    DbOp::Delete(id, _) => {
                        flows.push(FlowOp::Delete(*id));
                        rows -= 1;
                        meta.digest = meta.digest.wrapping_sub(schema::id_digest(*id));
                    }
                    DbOp::Holder(node, instance) => ops.push(TxnOp::put(
                        self.keys.agent(node),
                        codec::encode_holder(node, *instance),
                        None,
                    )),
                    DbOp::JobPut(j) => {
                        ops.push(TxnOp::put(self.keys.job(&j.id), codec::encode_job(j), None))
                    }
                    DbOp::JobDelete(id) => {
                        // Counted with the flows' deletes: the books hold the job, so
                        // its key must be there.
                        ops.push(TxnOp::delete(self.keys.job(id), None));
                        deletes += 1;
                    }
                }
            }
        }
        // The flows' keys: one for this transaction's grants, one write for each
        // group that lost a flow (`groups`).
        for k in self.groups.apply(&flows)? {
            match k {
                KeyOp::Put(key, value) => ops.push(TxnOp::put(self.keys.flow(key), value, None)),
                KeyOp::Delete(key) => {
                    ops.push(TxnOp::delete(self.keys.flow(key), None));
                    deletes += 1;
                }
            }
        }
        meta.rows = rows.max(0) as u64;
        let next = codec::encode_meta(&meta);
        ops.push(TxnOp::put(self.keys.meta(), next.clone(), None));
        let txn = Txn::new()
            .when([
                Compare::create_revision(self.fence.key.clone(), CompareOp::Equal, self.fence.rev),
                Compare::value(self.keys.meta(), CompareOp::Equal, prev.0.to_vec()),
            ])
            .and_then(ops)
            .or_else([TxnOp::get(self.fence.key.clone(), None)]);
        Ok(Batch {
            sent: self.send(txn.clone()),
            jobs,
            txn,
            deletes,
            prev: prev.0.to_vec(),
            next,
            meta,
            attempts: 1,
        })
    }

    fn send(&self, txn: Txn) -> Sent {
        let mut kv = self.pinned.as_ref().unwrap_or(&self.client).kv_client();
        let patience = self.patience;
        tokio::spawn(async move {
            match tokio::time::timeout(patience, kv.txn(txn)).await {
                Ok(Ok(r)) => Ok(r),
                Ok(Err(e)) if !uncertain(&e) => Err(format!("etcd refused the commit: {e}")),
                Ok(Err(e)) => Err(format!("uncertain: {e}")),
                Err(_) => Err(format!("uncertain: no reply within {patience:?}")),
            }
        })
    }

    /// Takes jobs from `waiting` for one transaction: as many as fit in
    /// `max_ops - 1` writes (the meta key takes one; a transaction's flows take at
    /// most one write each, `groups`), stopping before a job that writes a holder or
    /// job key the transaction already writes (etcd refuses a transaction that names
    /// a key twice; the next one takes it; the flows' writes are merged per key). A job larger than that (a start-up
    /// release of many unfit grants) is split; its completion goes with its last part.
    fn take(&self, waiting: &mut VecDeque<Job>) -> Vec<Job> {
        let room = self.max_ops - 1;
        let mut out = Vec::new();
        let mut keys = std::collections::HashSet::new();
        let mut n = 0;
        while let Some(j) = waiting.front_mut() {
            let len = j.ops.len().max(1);
            let job_keys: Vec<String> = j.ops.iter().filter_map(|op| self.key_of(op)).collect();
            if job_keys.iter().any(|k| keys.contains(k)) {
                break;
            }
            if n + len <= room {
                n += len;
                keys.extend(job_keys);
                out.push(waiting.pop_front().expect("front exists"));
                continue;
            }
            if out.is_empty() {
                let head: Vec<DbOp> = j.ops.drain(..room).collect();
                out.push(Job {
                    ops: head,
                    done: Box::new(|| {}),
                });
            }
            break;
        }
        out
    }

    /// The key an op writes, unless it is a flow's (merged per group's key).
    fn key_of(&self, op: &DbOp) -> Option<String> {
        match op {
            DbOp::Insert(_) | DbOp::Delete(..) => None,
            DbOp::Holder(node, _) => Some(self.keys.agent(node)),
            DbOp::JobPut(j) => Some(self.keys.job(&j.id)),
            DbOp::JobDelete(id) => Some(self.keys.job(id)),
        }
    }

    /// Finds out whether `b` committed, reading the election key and the meta key;
    /// `later` are the meta values the transactions behind it would write.
    async fn resolve(&self, prev: &[u8], next: &[u8], seq: u64, later: &[Vec<u8>]) -> Outcome {
        let deadline = Instant::now() + self.patience;
        let mut backoff = Duration::from_millis(20);
        loop {
            let read = Txn::new().and_then([
                TxnOp::get(self.fence.key.clone(), None),
                TxnOp::get(self.keys.meta(), None),
            ]);
            let mut kv = self.client.kv_client();
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left.max(Duration::from_millis(1)), kv.txn(read)).await {
                Ok(Ok(r)) => {
                    let got: Vec<Option<(i64, Vec<u8>)>> = r
                        .op_responses()
                        .into_iter()
                        .map(|op| match op {
                            TxnOpResponse::Get(g) => g
                                .kvs()
                                .first()
                                .map(|kv| (kv.create_revision(), kv.value().to_vec())),
                            _ => None,
                        })
                        .collect();
                    let held =
                        matches!(got.first(), Some(Some((rev, _))) if *rev == self.fence.rev);
                    let meta = got.get(1).cloned().flatten().map(|(_, v)| v);
                    return match meta {
                        Some(m) if m == next || later.contains(&m) => Outcome::Committed,
                        _ if !held => Outcome::Lost(
                            "deposed: this replica's election key is gone (its lease ran out, or another replica revoked it)".into(),
                        ),
                        Some(m) if m == prev => Outcome::Resend,
                        _ => Outcome::Lost(
                            "the meta key holds a transaction this leader did not write".into(),
                        ),
                    };
                }
                Ok(Err(e)) if !uncertain(&e) => {
                    return Outcome::Lost(format!("etcd refused a read: {e}"))
                }
                _ if Instant::now() >= deadline => {
                    return Outcome::Lost(format!(
                        "etcd unreachable for {:?}; the outcome of transaction {} is unknown",
                        self.patience, seq
                    ))
                }
                _ => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(200));
                }
            }
        }
    }

    /// `b` committed: the meta moves on, the witness records it, the completions run.
    fn confirm(&mut self, b: Batch) {
        self.meta = b.meta;
        self.meta_bytes = b.next;
        if let Some(w) = &self.witness {
            let record = Account {
                db_id: self.meta.db_id,
                seq: self.meta.seq,
                rows: self.meta.rows,
                digest: self.meta.digest,
            }
            .record();
            if let Err(e) = w.record(record) {
                if std::mem::take(&mut self.witness_ok) {
                    tracing::warn!(store = %self.store, error = %e, "cannot write the witness file");
                }
            }
        }
        for j in b.jobs {
            (j.done)();
        }
    }
}

/// Whether a committed transaction deleted every flow key it meant to.
fn deleted_all(r: &TxnResponse, deletes: usize) -> bool {
    let n: i64 = r
        .op_responses()
        .into_iter()
        .map(|op| match op {
            TxnOpResponse::Delete(d) => d.deleted(),
            _ => 0,
        })
        .sum();
    n == deletes as i64
}

async fn run(s: Setup, mut rx: mpsc::UnboundedReceiver<Job>) {
    let lost = s.lost;
    let mut w = Writer {
        client: s.client,
        pinned: s.pinned,
        keys: s.keys,
        fence: s.fence,
        meta: s.meta,
        meta_bytes: s.meta_bytes,
        groups: s.groups,
        witness: s.witness,
        witness_ok: true,
        max_ops: s.max_ops,
        pipeline: s.pipeline,
        gather: s.gather,
        patience: s.patience,
        store: s.store,
    };
    let mut waiting: VecDeque<Job> = VecDeque::new();
    let mut inflight: VecDeque<Batch> = VecDeque::new();
    let mut open = true;
    // How long a free writer holds back what waits (`gather`'s module).
    let mut rule = Gather::new(w.gather);
    let (why, unacknowledged) = 'term: loop {
        while let Ok(j) = rx.try_recv() {
            waiting.push_back(j);
        }
        let now = Instant::now();
        rule.note(now, waiting.len());
        if inflight.len() < w.pipeline && open {
            let ops = waiting.iter().map(|j| j.ops.len()).sum::<usize>();
            if let Some(until) = rule.hold(now, waiting.len(), ops, w.max_ops - 1) {
                tokio::select! {
                    j = rx.recv() => match j {
                        Some(j) => waiting.push_back(j),
                        None => open = false,
                    },
                    _ = tokio::time::sleep_until(until.into()) => rule.expired(),
                }
                continue;
            }
        }
        while inflight.len() < w.pipeline && !waiting.is_empty() {
            let jobs = w.take(&mut waiting);
            let n = jobs.len();
            let (prev, meta) = match inflight.back() {
                Some(last) => (last.next.clone(), last.meta.clone()),
                None => (w.meta_bytes.clone(), w.meta.clone()),
            };
            let b = match w.batch(jobs, (&prev, &meta)) {
                Ok(b) => b,
                Err(e) => break 'term (e, n),
            };
            rule.sent();
            inflight.push_back(b);
        }
        if inflight.is_empty() {
            if !open {
                return;
            }
            match rx.recv().await {
                Some(j) => waiting.push_back(j),
                None => open = false,
            }
            continue;
        }
        let room = inflight.len() < w.pipeline;
        let front = inflight.front_mut().expect("not empty");
        let res = tokio::select! {
            biased;
            res = &mut front.sent => res.unwrap_or_else(|e| Err(format!("uncertain: {e}"))),
            j = rx.recv(), if open && room => {
                match j {
                    Some(j) => waiting.push_back(j),
                    None => open = false,
                }
                continue;
            }
        };
        let b = inflight.pop_front().expect("not empty");
        // If this transaction ends the term, its jobs are dropped with the rest.
        let ending = b.jobs.len();
        let outcome = match res {
            Ok(r) if r.succeeded() => {
                if !deleted_all(&r, b.deletes) {
                    break (
                        format!(
                            "transaction {} deleted fewer flow keys than the books released: the \
                             store and the books disagree",
                            b.meta.seq
                        ),
                        ending,
                    );
                }
                Outcome::Committed
            }
            Err(e) if !e.starts_with("uncertain") => break (e, ending),
            _ => {
                if w.pinned.take().is_some() {
                    tracing::info!(store = %w.store, "a commit to etcd's Raft leader failed: \
                        commits go to every member that answers from now on");
                }
                let later: Vec<Vec<u8>> = inflight.iter().map(|l| l.next.clone()).collect();
                w.resolve(&b.prev, &b.next, b.meta.seq, &later).await
            }
        };
        match outcome {
            Outcome::Committed => {
                while let Ok(j) = rx.try_recv() {
                    waiting.push_back(j);
                }
                rule.committed(waiting.len(), b.jobs.len());
                w.confirm(b)
            }
            Outcome::Resend if b.attempts < 16 => {
                tracing::debug!(store = %w.store, seq = b.meta.seq, attempts = b.attempts,
                    "a transaction was not applied (sent ahead of its predecessor, or lost); sending it again");
                let mut b = b;
                b.attempts += 1;
                b.sent = w.send(b.txn.clone());
                inflight.push_front(b);
            }
            Outcome::Resend => {
                break (
                    format!(
                        "transaction {} was refused 16 times with this replica still leader",
                        b.meta.seq
                    ),
                    ending,
                )
            }
            Outcome::Lost(why) => break (why, ending),
        }
    };
    // Deposed: nothing queued or in flight is acknowledged. Later jobs are dropped as
    // they come (the receiver goes with this task).
    let mut dropped = unacknowledged + waiting.len();
    for b in inflight.drain(..) {
        b.sent.abort();
        dropped += b.jobs.len();
    }
    tracing::warn!(store = %w.store, reason = %why, dropped, "the store writer stopped: this replica no longer commits; `dropped` decisions were never acknowledged");
    let _ = lost.send(format!(
        "{why} ({dropped} decision{} never acknowledged)",
        if dropped == 1 { "" } else { "s" }
    ));
}
