//! Job reservations in the master's books: a job's whole demand reserved in the ledger
//! at once or not at all, released as one, held by a lease (thesis §3.3.1's admission
//! for a set of flows; the leases of §4.3's local managers extended to jobs).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::changes::{Changes, DbOp, JobOutcome, JobVerdict};
use super::error::BooksError;
use super::job::{shortfall, HeldJob, JobRecord, PreparedJob};
use super::State;
use crate::protocol::job::JobInfo;
use crate::protocol::Owner;

impl State {
    /// Decides a prepared job at `now`: a retry of a job held with the same contents
    /// is granted again (nothing written), the same id with other contents is a
    /// conflict; otherwise the whole demand is reserved or nothing is.
    pub fn reserve_job(
        &mut self,
        job: PreparedJob,
        now: Instant,
    ) -> Result<JobOutcome, BooksError> {
        if let Some(held) = self.jobs.get(&job.record.id) {
            return match held.record.differs(&job.record) {
                None => Ok(JobOutcome {
                    decision: JobVerdict::Granted((*held.info).clone()),
                    db: None,
                    changes: Changes::default(),
                }),
                Some(why) => Err(BooksError::Conflict(format!(
                    "job '{}' exists with other contents: {why}; release it first or choose another id",
                    job.record.id
                ))),
            };
        }
        if let Err(r) = self.ledger.check_demand_alone(&job.demand) {
            return Ok(JobOutcome {
                decision: JobVerdict::Rejected(shortfall(&r, true)),
                db: None,
                changes: Changes::default(),
            });
        }
        if let Err(r) = self.ledger.reserve(&job.demand) {
            return Ok(JobOutcome {
                decision: JobVerdict::Rejected(shortfall(&r, false)),
                db: None,
                changes: Changes::default(),
            });
        }
        let info = Arc::new(job.record.info(job.demand.flows));
        let record = job.record.clone();
        self.jobs.insert(
            job.record.id.clone(),
            HeldJob {
                record: job.record,
                info: info.clone(),
                demand: job.demand,
                seen: now,
            },
        );
        let mut changes = self.reshare();
        changes.jobs.push((info.clone(), true));
        let info = (*info).clone();
        Ok(JobOutcome {
            decision: JobVerdict::Granted(info),
            db: Some(DbOp::JobPut(record)),
            changes,
        })
    }

    /// Releases job `id` for `owner`.
    pub fn release_job(&mut self, id: &str, owner: &str) -> Result<(DbOp, Changes), BooksError> {
        let held = self
            .jobs
            .get(id)
            .ok_or_else(|| BooksError::UnknownJob(id.to_string()))?;
        if held.record.owner != owner {
            return Err(BooksError::NotOwner(format!(
                "job '{id}' is held by '{}'; '{owner}' may not release it",
                held.record.owner
            )));
        }
        Ok(self.drop_job(id))
    }

    /// Renews job `id`'s lease for `owner` at `now`.
    pub fn renew_job(&mut self, id: &str, owner: &str, now: Instant) -> Result<(), BooksError> {
        let held = self
            .jobs
            .get_mut(id)
            .ok_or_else(|| BooksError::UnknownJob(id.to_string()))?;
        if held.record.owner != owner {
            return Err(BooksError::NotOwner(format!(
                "job '{id}' is held by '{}'; '{owner}' may not renew it",
                held.record.owner
            )));
        }
        held.seen = now;
        Ok(())
    }

    /// Renews the jobs held by `owner`'s process on node `node` (its agent lists it
    /// alive).
    pub(super) fn renew_process_jobs(&mut self, node: &str, owner: Owner, now: Instant) {
        for held in self.jobs.values_mut() {
            if let Some((n, o)) = &held.record.process {
                if n == node && *o == owner {
                    held.seen = now;
                }
            }
        }
    }

    fn drop_job(&mut self, id: &str) -> (DbOp, Changes) {
        let held = self.jobs.remove(id).expect("caller checked");
        self.ledger.unreserve(&held.demand);
        let mut changes = self.reshare();
        changes.jobs.push((held.info, false));
        (DbOp::JobDelete(held.record.id), changes)
    }

    /// Releases the jobs whose lease ran out by `now`. A job held by a process is
    /// renewed by its agent's heartbeats, which come every third of the manager's
    /// `lease`: its own lease is taken to be at least that long.
    pub(super) fn expire_jobs(&mut self, now: Instant, lease: Duration) -> Vec<(DbOp, Changes)> {
        let dead: Vec<String> = self
            .jobs
            .values()
            .filter(|h| {
                let mut l = Duration::from_millis(h.record.lease_ms);
                if h.record.process.is_some() {
                    l = l.max(lease);
                }
                now.saturating_duration_since(h.seen) > l
            })
            .map(|h| h.record.id.clone())
            .collect();
        dead.iter().map(|id| self.drop_job(id)).collect()
    }

    /// Every job held, by id.
    pub fn jobs(&self) -> Vec<JobInfo> {
        let mut v: Vec<JobInfo> = self.jobs.values().map(|h| (*h.info).clone()).collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    /// The jobs `node`'s agent follows: those naming the node, and those held by a
    /// process on it. By id.
    pub fn node_jobs(&self, node: &str) -> Vec<Arc<JobInfo>> {
        let mut v: Vec<Arc<JobInfo>> = self
            .jobs
            .values()
            .filter(|h| h.info.concerns(node))
            .map(|h| h.info.clone())
            .collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    /// Number of jobs held.
    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    /// Re-reserves a job read back from the store at start-up; a job that no longer
    /// fits (the topology changed) is refused with the reason.
    pub fn restore_job(&mut self, record: JobRecord, now: Instant) -> Result<(), BooksError> {
        let demand = self
            .ledger
            .demand(super::job::flows(&self.topo, &record.body)?)
            .map_err(|e| BooksError::Conflict(e.to_string()))?;
        let job = PreparedJob { record, demand };
        let id = job.record.id.clone();
        match self.reserve_job(job, now)?.decision {
            JobVerdict::Granted(_) => Ok(()),
            JobVerdict::Rejected(s) => Err(BooksError::Conflict(format!(
                "job '{id}' does not fit: {} short by {} B/s",
                s.resource, s.short_by
            ))),
        }
    }

    /// How many resources job `id`'s demand touches, if held.
    pub fn job_demand_entries(&self, id: &str) -> Option<usize> {
        self.jobs.get(id).map(|h| h.demand.amounts.len())
    }

    /// The record of job `id`, if held.
    pub fn job(&self, id: &str) -> Option<&JobRecord> {
        self.jobs.get(id).map(|h| &h.record)
    }
}
