//! The spanned tree: every YAML node of a suite with its position, parsed from the same text
//! the suite deserialized from, so that the checks after deserializing can place each error at
//! the key or value it is about.

use std::fmt;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

/// Any YAML node, with the position of every key and value.
#[derive(Debug)]
pub(super) enum Node {
    Null,
    Bool,
    Int,
    Float,
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<Node>, Spanned<Node>)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Any;
        impl<'de> Visitor<'de> for Any {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any YAML node")
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_none<E>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Node, E> {
                Ok(Node::Bool)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Node, E> {
                Ok(Node::Int)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Node, E> {
                Ok(Node::Int)
            }
            fn visit_i128<E>(self, _: i128) -> Result<Node, E> {
                Ok(Node::Int)
            }
            fn visit_u128<E>(self, _: u128) -> Result<Node, E> {
                Ok(Node::Int)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Node, E> {
                Ok(Node::Float)
            }
            fn visit_str<E>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Str(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element()? {
                    out.push(item);
                }
                Ok(Node::Seq(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key()? {
                    out.push((key, map.next_value()?));
                }
                Ok(Node::Map(out))
            }
        }
        d.deserialize_any(Any)
    }
}

/// A step of a path into the tree.
#[derive(Debug, Clone, Copy)]
pub(super) enum Seg<'a> {
    Key(&'a str),
    Index(usize),
    /// The value of a map's first entry: a step's fields under its kind (`register:`).
    Only,
}

use Seg::{Index, Key, Only};

/// Where a path leads: the deepest node that exists along it (a whole-scenario position beats
/// none when an alias or merge hides the exact one).
pub(super) fn locate(tree: &Spanned<Node>, path: &[Seg]) -> Location {
    let mut here = tree;
    for seg in path {
        let next = match (seg, &here.value) {
            (Key(k), Node::Map(entries)) => {
                entries.iter().find(|(key, _)| matches!(&key.value, Node::Str(s) if s == k)).map(|(_, v)| v)
            }
            (Index(i), Node::Seq(items)) => items.get(*i),
            (Only, Node::Map(entries)) => entries.first().map(|(_, v)| v),
            _ => None,
        };
        match next {
            Some(n) => here = n,
            None => break,
        }
    }
    here.referenced
}

/// The path `rest` under `base`: a field of a step, from the step's own path.
pub(super) fn under(base: &[Seg<'static>], rest: &[Seg<'static>]) -> Vec<Seg<'static>> {
    let mut p = base.to_vec();
    p.extend_from_slice(rest);
    p
}

pub(super) fn node_at<'t>(tree: &'t Spanned<Node>, path: &[Seg]) -> Option<&'t Node> {
    let mut here = tree;
    for seg in path {
        here = match (seg, &here.value) {
            (Key(k), Node::Map(entries)) => {
                &entries.iter().find(|(key, _)| matches!(&key.value, Node::Str(s) if s == k))?.1
            }
            (Index(i), Node::Seq(items)) => items.get(*i)?,
            (Only, Node::Map(entries)) => &entries.first()?.1,
            _ => return None,
        };
    }
    Some(&here.value)
}

/// What YAML made of a scalar the model reads as text, when that is not a string.
pub(super) fn non_string(node: &Node) -> Option<&'static str> {
    match node {
        Node::Int => Some("number"),
        Node::Float => Some("number"),
        Node::Bool => Some("boolean"),
        Node::Null => Some("null"),
        _ => None,
    }
}
