//! How the master's books lie in etcd: the keys under the prefix
//! and their JSON values, each with the same checksum the SQLite rows carry
//! (`schema::flow_checksum`), so a value changed outside the
//! manager is found when a replica loads the store.
//!
//! - `<prefix>flows/<id, 20 digits>`: one granted flow, or (`groups`, grouped) the
//!   flows one transaction granted and that are not released yet as a JSON array,
//!   named by the id of the first (ids in grant order, so the keys and the flows in
//!   each sort in grant order);
//! - `<prefix>agents/<node>`: the agent instance holding the node;
//! - `<prefix>jobs/<id>`: a job reservation's compact record (checksummed, outside the
//!   meta key's count of flows);
//! - `<prefix>meta`: the store's identity, the number of the last transaction, the
//!   number of flow keys and the digest of their ids after it, the leadership term
//!   that wrote it and the fingerprint of that leader's topology — rewritten by every
//!   transaction, which compares it first: the transactions form one chain;
//! - `<prefix>leader`: the election (etcd's election API keeps its keys under it).

use serde::{Deserialize, Serialize};

use super::super::schema;
use crate::manager::state::{FlowRow, JobRecord};
use crate::protocol::{ClassSpec, FlowSpec, Owner};

/// The election key a leader holds: its commits are fenced by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The key.
    pub key: Vec<u8>,
    /// Its create revision.
    pub rev: i64,
}

/// The keys of one store.
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// Keys under `prefix` (which ends with `/`).
    pub fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.to_string(),
        }
    }

    /// The meta key.
    pub fn meta(&self) -> String {
        format!("{}meta", self.prefix)
    }

    /// The key of flow `id`.
    pub fn flow(&self, id: i64) -> String {
        format!("{}flows/{id:020}", self.prefix)
    }

    /// Every flow key starts with it.
    pub fn flows(&self) -> String {
        format!("{}flows/", self.prefix)
    }

    /// The key of node `node`'s holder.
    pub fn agent(&self, node: &str) -> String {
        format!("{}agents/{node}", self.prefix)
    }

    /// Every holder key starts with it.
    pub fn agents(&self) -> String {
        format!("{}agents/", self.prefix)
    }

    /// A job's key.
    pub fn job(&self, id: &str) -> String {
        format!("{}jobs/{id}", self.prefix)
    }

    /// The prefix of every job key.
    pub fn jobs(&self) -> String {
        format!("{}jobs/", self.prefix)
    }

    /// The election's name.
    pub fn election(&self) -> String {
        format!("{}leader", self.prefix)
    }

    /// The flow id a key names, if it is a flow key.
    pub fn flow_id(&self, key: &[u8]) -> Option<i64> {
        let rest = key.strip_prefix(self.flows().as_bytes())?;
        let text = std::str::from_utf8(rest).ok()?;
        (text.len() == 20 && text.bytes().all(|b| b.is_ascii_digit()))
            .then(|| text.parse().ok())
            .flatten()
    }
}

/// The end of the key range of every key starting with `prefix`.
pub fn range_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    // The prefix ends with '/', never 0xff: incrementing its last byte is enough.
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowValue {
    id: i64,
    flow: FlowSpec,
    name: String,
    class: ClassSpec,
    owner: Owner,
    checksum: i64,
}

/// A flow's value.
pub fn encode_flow(r: &FlowRow) -> Vec<u8> {
    serde_json::to_vec(&FlowValue {
        id: r.id,
        flow: r.spec.clone(),
        name: r.name.clone(),
        class: r.class,
        owner: r.owner,
        checksum: schema::flow_checksum(r),
    })
    .expect("flow rows serialize")
}

/// A flow read back: the row and whether its checksum holds.
pub fn decode_flow(bytes: &[u8]) -> Result<(FlowRow, bool), String> {
    let v: FlowValue =
        serde_json::from_slice(bytes).map_err(|e| format!("does not decode: {e}"))?;
    Ok(checked(v))
}

/// A group's flows read back (`groups`: a JSON array of flow values; a single
/// flow value is a group of one): each row and whether its checksum holds.
pub fn decode_flows(bytes: &[u8]) -> Result<Vec<(FlowRow, bool)>, String> {
    if bytes.trim_ascii_start().first() == Some(&b'[') {
        let v: Vec<FlowValue> =
            serde_json::from_slice(bytes).map_err(|e| format!("does not decode: {e}"))?;
        Ok(v.into_iter().map(checked).collect())
    } else {
        Ok(vec![decode_flow(bytes)?])
    }
}

fn checked(v: FlowValue) -> (FlowRow, bool) {
    let row = FlowRow {
        id: v.id,
        spec: v.flow,
        name: v.name,
        class: v.class,
        owner: v.owner,
    };
    let ok = schema::flow_checksum(&row) == v.checksum;
    (row, ok)
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HolderValue {
    instance: String,
    checksum: i64,
}

/// A holder's value.
pub fn encode_holder(node: &str, instance: u64) -> Vec<u8> {
    serde_json::to_vec(&HolderValue {
        instance: format!("{instance:016x}"),
        checksum: schema::holder_checksum(node, instance),
    })
    .expect("holders serialize")
}

/// A holder read back: the instance, if the value decodes and its checksum holds.
pub fn decode_holder(node: &str, bytes: &[u8]) -> Option<u64> {
    let v: HolderValue = serde_json::from_slice(bytes).ok()?;
    let instance = u64::from_str_radix(&v.instance, 16).ok()?;
    (schema::holder_checksum(node, instance) == v.checksum).then_some(instance)
}

#[derive(Serialize, Deserialize)]
struct JobValue {
    body: String,
    checksum: i64,
}

/// A job's value: its record as JSON, checksummed as the SQLite row is.
pub fn encode_job(j: &JobRecord) -> Vec<u8> {
    let body = serde_json::to_string(j).expect("job records serialize");
    serde_json::to_vec(&JobValue {
        checksum: schema::job_checksum(&j.id, &body),
        body,
    })
    .expect("jobs serialize")
}

/// A job read back, if the value decodes, its checksum holds and it is job `id`.
pub fn decode_job(id: &str, bytes: &[u8]) -> Option<JobRecord> {
    let v: JobValue = serde_json::from_slice(bytes).ok()?;
    if schema::job_checksum(id, &v.body) != v.checksum {
        return None;
    }
    let j: JobRecord = serde_json::from_str(&v.body).ok()?;
    (j.id == id).then_some(j)
}

/// The meta value's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// The store's identity.
    pub db_id: [u8; 16],
    /// The last transaction.
    pub seq: u64,
    /// Flow keys after it.
    pub rows: u64,
    /// Sum (wrapping) of `schema::id_digest` over their ids.
    pub digest: u64,
    /// The leadership term that wrote it: the create revision of its election key.
    pub term: i64,
    /// Fingerprint of that leader's topology.
    pub topology: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetaValue {
    db_id: String,
    seq: u64,
    rows: u64,
    digest: String,
    term: i64,
    topology: String,
    checksum: i64,
}

fn meta_checksum(m: &Meta) -> i64 {
    schema::digest(&[
        b"meta/1",
        &m.db_id,
        &m.seq.to_le_bytes(),
        &m.rows.to_le_bytes(),
        &m.digest.to_le_bytes(),
        &m.term.to_le_bytes(),
        m.topology.as_bytes(),
    ])
}

/// The meta value.
pub fn encode_meta(m: &Meta) -> Vec<u8> {
    serde_json::to_vec(&MetaValue {
        db_id: super::super::api::hex_id(m.db_id),
        seq: m.seq,
        rows: m.rows,
        digest: format!("{:016x}", m.digest),
        term: m.term,
        topology: m.topology.clone(),
        checksum: meta_checksum(m),
    })
    .expect("meta serializes")
}

/// The meta value read back, checksum checked.
pub fn decode_meta(bytes: &[u8]) -> Result<Meta, String> {
    let v: MetaValue =
        serde_json::from_slice(bytes).map_err(|e| format!("does not decode: {e}"))?;
    let m = Meta {
        db_id: super::super::api::parse_db_id(&v.db_id)
            .ok_or_else(|| format!("its identity {:?} is damaged", v.db_id))?,
        seq: v.seq,
        rows: v.rows,
        digest: u64::from_str_radix(&v.digest, 16)
            .map_err(|_| format!("its digest {:?} is damaged", v.digest))?,
        term: v.term,
        topology: v.topology,
    };
    if meta_checksum(&m) != v.checksum {
        return Err("fails its checksum".into());
    }
    Ok(m)
}

/// A fingerprint of a topology: what admission depends on (hosts with their rate
/// parameters and limits, switches and cables, routing), hashed.
pub fn topology_fingerprint(t: &qos_core::topology::Topology) -> String {
    let text = serde_json::to_vec(&(t.nodes(), t.switches(), format!("{:?}", t.routing_kind())))
        .expect("topologies serialize");
    let d = ring::digest::digest(&ring::digest::SHA256, &text);
    d.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::EndpointSpec;

    fn row() -> FlowRow {
        FlowRow {
            id: 42,
            spec: FlowSpec {
                src: EndpointSpec {
                    node: "a".into(),
                    port: 1,
                },
                dst: EndpointSpec {
                    node: "b".into(),
                    port: 2,
                },
                priority: 3,
            },
            name: "video".into(),
            class: ClassSpec::Premium { bandwidth: 1000 },
            owner: Owner { uid: 5, pid: 6 },
        }
    }

    #[test]
    fn values_round_trip_and_a_changed_field_fails_its_checksum() {
        let r = row();
        let v = encode_flow(&r);
        assert_eq!(decode_flow(&v).unwrap(), (r.clone(), true));
        let changed = String::from_utf8(v).unwrap().replace("1000", "9000");
        let (back, ok) = decode_flow(changed.as_bytes()).unwrap();
        assert_eq!(back.class, ClassSpec::Premium { bandwidth: 9000 });
        assert!(!ok);
        assert!(decode_flow(b"{\"id\":1}").is_err());

        assert_eq!(decode_holder("a", &encode_holder("a", 77)), Some(77));
        assert_eq!(decode_holder("b", &encode_holder("a", 77)), None);

        let m = Meta {
            db_id: [9; 16],
            seq: 12,
            rows: 3,
            digest: u64::MAX - 5,
            term: 1234,
            topology: "abcd".into(),
        };
        let v = encode_meta(&m);
        assert_eq!(decode_meta(&v).unwrap(), m);
        let changed = String::from_utf8(v)
            .unwrap()
            .replace("\"rows\":3", "\"rows\":4");
        assert!(decode_meta(changed.as_bytes())
            .unwrap_err()
            .contains("checksum"));
    }

    #[test]
    fn flow_keys_sort_in_grant_order_and_name_their_id() {
        let k = Keys::new("/p/");
        assert!(k.flow(9) < k.flow(10));
        assert_eq!(k.flow_id(k.flow(123).as_bytes()), Some(123));
        assert_eq!(k.flow_id(b"/p/flows/12"), None);
        assert_eq!(k.flow_id(k.agent("a").as_bytes()), None);
        assert_eq!(range_end("/p/"), b"/p0".to_vec());
    }
}
