//! A tool's JSON Schema as a **bounded** Lark grammar: every string, number, array, object and
//! nesting level has a maximum size, so a constrained call always closes.
//!
//! llguidance's own `%json` compiles a schema faithfully, including what a schema leaves open
//! (strings and numbers of any length, additional properties, arbitrary nesting); a small model
//! then wanders into that freedom and never closes the call. This compiler writes the grammar
//! itself, with these bounds:
//!
//! | construct | bound |
//! |---|---|
//! | string | `maxLength` from the schema (at most [`STRING_CEILING`]), else [`DEFAULT_MAX_LENGTH`] characters; `pattern` honoured (within that length) |
//! | integer | the schema's `minimum`/`maximum` when it has both, else at most 15 digits |
//! | number | at most 15 integer and 6 fraction digits, no exponent |
//! | array | `maxItems` (at most [`MAX_ITEMS`]); `minItems` honoured |
//! | object | only the declared `properties` (required ones always, optional ones may be left out), in the schema's order; a map (`additionalProperties` schema, no `properties`) at most [`MAX_ITEMS`] entries |
//! | value of any type (`{}`, `true`, unknown keywords) | scalars, or containers nested at most two deep |
//! | `$ref` / nesting | [`MAX_DEPTH`] levels |
//!
//! `enum` and `const` become their literal JSON texts; `anyOf`/`oneOf` alternatives, `allOf`
//! a merge. Whitespace is fixed (`", "` between items, `": "` after keys), as the prompt
//! shows calls. Along with the grammar comes an upper bound of its output in bytes, which is
//! also a bound in tokens (every token of the vocabulary is at least one byte).

use serde_json::{Map, Value};

/// Characters of a string whose schema sets no `maxLength`.
pub(crate) const DEFAULT_MAX_LENGTH: usize = 256;
/// The largest `maxLength` honoured (a larger one is cut to this).
pub(crate) const STRING_CEILING: usize = 4096;
/// Items of an array (or entries of a map) at most.
pub(crate) const MAX_ITEMS: usize = 8;
/// Nesting levels (objects, arrays, `$ref`s) at most.
pub(crate) const MAX_DEPTH: usize = 8;
/// Rules a grammar may have before the schema is judged too large to compile as written.
const MAX_RULES: usize = 4000;
/// Integer digits of a number without both bounds.
const INT_DIGITS: usize = 15;
/// Fraction digits of a number.
const FRACTION_DIGITS: usize = 6;
/// Bytes of one JSON string character at most (`\uXXXX`).
const CHAR_BYTES: usize = 6;
/// Items of a container in a value of any type.
const GENERIC_ITEMS: usize = 4;
/// Characters of a key or string in a value of any type.
const GENERIC_STRING: usize = 64;

/// A compiled schema: the Lark rules and the name of the rule of its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Compiled {
    /// Rule definitions, one per line.
    pub(crate) rules: String,
    /// The rule that matches the whole value.
    pub(crate) root: String,
    /// The longest text the rule can match, in bytes.
    pub(crate) max_bytes: usize,
}

/// Why a schema (or a part of it) has no bounded grammar as written.
#[derive(Debug)]
struct Unbounded;

/// A rule reference and the most bytes it can match.
#[derive(Debug, Clone)]
struct Node {
    expr: String,
    bytes: usize,
}

/// Compiles `schema` (a tool's parameters) into rules whose names start with `prefix`
/// (lower-case letters, digits and `_`). `patterns`: whether string `pattern`s are compiled
/// (a pattern the regex engine rejects makes the whole grammar fail; compile again without).
/// A schema that cannot be bounded as written (`false`, an unresolvable `$ref`, recursion
/// deeper than [`MAX_DEPTH`] that it requires) gets a grammar of any bounded JSON object.
///
/// `quote`: what every string argument at the top level must say (the tool result an answer
/// reports; see [`super::Quote`]).
pub(crate) fn compile(
    schema: &Value,
    prefix: &str,
    patterns: bool,
    quote: Option<&super::Quote>,
) -> Compiled {
    let mut compiler =
        Compiler { root: schema, prefix, rules: String::new(), next: 0, patterns, quote };
    let node = match compiler.value(schema, 0) {
        Ok(node) => node,
        Err(Unbounded) => {
            compiler.rules.clear();
            compiler.next = 0;
            compiler.any_object()
        }
    };
    let root = compiler.rule(node.expr);
    Compiled { rules: compiler.rules, root, max_bytes: node.bytes }
}

struct Compiler<'a> {
    root: &'a Value,
    prefix: &'a str,
    rules: String,
    next: usize,
    patterns: bool,
    quote: Option<&'a super::Quote>,
}

impl<'a> Compiler<'a> {
    /// Adds a rule; its name.
    fn rule(&mut self, body: String) -> String {
        let name = format!("{}r{}", self.prefix, self.next);
        self.next += 1;
        self.rules.push_str(&format!("{name}: {body}\n"));
        name
    }

    /// Adds a terminal (a regular expression, `/`-delimited or a conjunction of them); its name.
    fn terminal(&mut self, body: String) -> String {
        let name = format!("{}T{}", self.prefix.to_ascii_uppercase(), self.next);
        self.next += 1;
        self.rules.push_str(&format!("{name}: {body}\n"));
        name
    }

    fn value(&mut self, schema: &Value, depth: usize) -> Result<Node, Unbounded> {
        if depth > MAX_DEPTH || self.next > MAX_RULES {
            return Err(Unbounded);
        }
        let map = match schema {
            Value::Bool(true) => return Ok(self.any(2)),
            Value::Object(map) => map,
            _ => return Err(Unbounded),
        };
        if let Some(Value::String(reference)) = map.get("$ref") {
            let target = resolve(self.root, reference).ok_or(Unbounded)?;
            let mut merged = target.as_object().cloned().unwrap_or_default();
            for (key, value) in map.iter().filter(|(key, _)| key.as_str() != "$ref") {
                merged.entry(key.clone()).or_insert_with(|| value.clone());
            }
            if !target.is_object() {
                return self.value(target, depth + 1);
            }
            return self.value(&Value::Object(merged), depth + 1);
        }
        if let Some(constant) = map.get("const") {
            return Ok(literal(constant));
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let literals: Vec<Node> = values.iter().map(literal).collect();
            return self.alternatives(literals);
        }
        if let Some(Value::Array(parts)) = map.get("allOf") {
            let mut merged = without(map, "allOf");
            for part in parts {
                merge(&mut merged, self.deref(part)?);
            }
            return self.value(&Value::Object(merged), depth + 1);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = map.get(key) {
                let base = without(map, key);
                let mut nodes = Vec::new();
                for option in options {
                    let mut merged = base.clone();
                    merge(&mut merged, self.deref(option)?);
                    if let Ok(node) = self.value(&Value::Object(merged), depth + 1) {
                        nodes.push(node);
                    }
                }
                return self.alternatives(nodes);
            }
        }
        let types: Vec<&str> = match map.get("type") {
            Some(Value::String(kind)) => vec![kind.as_str()],
            Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
            _ if map.contains_key("properties") => vec!["object"],
            _ if map.contains_key("items") || map.contains_key("prefixItems") => vec!["array"],
            _ => return Ok(self.any(2)),
        };
        let mut nodes = Vec::new();
        for kind in types {
            if let Ok(node) = self.typed(kind, map, depth) {
                nodes.push(node);
            }
        }
        self.alternatives(nodes)
    }

    /// A schema for merging: a `$ref` resolved, anything else as it is.
    fn deref<'s>(&self, schema: &'s Value) -> Result<&'s Map<String, Value>, Unbounded>
    where
        'a: 's,
    {
        let schema = match schema.get("$ref").and_then(Value::as_str) {
            Some(reference) => resolve(self.root, reference).ok_or(Unbounded)?,
            None => schema,
        };
        schema.as_object().ok_or(Unbounded)
    }

    fn alternatives(&mut self, nodes: Vec<Node>) -> Result<Node, Unbounded> {
        match nodes.len() {
            0 => Err(Unbounded),
            1 => Ok(nodes.into_iter().next().ok_or(Unbounded)?),
            _ => {
                let bytes = nodes.iter().map(|n| n.bytes).max().unwrap_or(0);
                let body = nodes.iter().map(|n| n.expr.as_str()).collect::<Vec<_>>().join(" | ");
                Ok(Node { expr: self.rule(body), bytes })
            }
        }
    }

    fn typed(
        &mut self,
        kind: &str,
        map: &Map<String, Value>,
        depth: usize,
    ) -> Result<Node, Unbounded> {
        match kind {
            "string" => Ok(self.string_at(map, depth)),
            "integer" => Ok(self.integer(map)),
            "number" => Ok(self.number(map)),
            "boolean" => Ok(Node { expr: "(\"true\" | \"false\")".into(), bytes: 5 }),
            "null" => Ok(Node { expr: "\"null\"".into(), bytes: 4 }),
            "object" => self.object(map, depth),
            "array" => self.array(map, depth),
            _ => Err(Unbounded),
        }
    }

    /// A string at `depth` (1: a top-level argument, which says [`Compiler::quote`]: then
    /// one sentence without escape sequences, so that the JSON text reads as the value).
    fn string_at(&mut self, map: &Map<String, Value>, depth: usize) -> Node {
        let Some(quote) = self.quote.filter(|_| depth == 1) else {
            return self.string(map);
        };
        let text = &quote.text;
        let max = map
            .get("maxLength")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_MAX_LENGTH, |n| usize::try_from(n).unwrap_or(usize::MAX))
            .clamp(text.chars().count(), STRING_CEILING);
        // One sentence: a period inside is followed by neither a space nor another period
        // (`2.5` stays possible). A small model that reports a result tends to repeat the
        // sentence ("50 is 50. The answer is 50. …") up to the bound otherwise.
        let sentence = if text.contains(". ") || text.contains("..") {
            String::new()
        } else {
            " & /\"(?:[^.]|\\.[^ .\"])*\\.?\"/".to_owned()
        };
        let numbers = quote.numbers_regex().map(|n| format!(" & /\"{n}\"/")).unwrap_or_default();
        let body = format!(
            "/\"[^\"\\\\\\x00-\\x1F]{{0,{max}}}\"/ & /\"[\\s\\S]*{}[\\s\\S]*\"/{sentence}{numbers}",
            super::regex_literal(text)
        );
        Node { expr: self.terminal(body), bytes: 2 + CHAR_BYTES * max }
    }

    fn string(&mut self, map: &Map<String, Value>) -> Node {
        let max = map
            .get("maxLength")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_MAX_LENGTH, |n| usize::try_from(n).unwrap_or(usize::MAX))
            .min(STRING_CEILING);
        let min = map
            .get("minLength")
            .and_then(Value::as_u64)
            .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX))
            .min(max);
        let pattern =
            map.get("pattern").and_then(Value::as_str).filter(|_| self.patterns).map(strip_anchors);
        let body = match pattern {
            // Within a pattern, characters that JSON would escape are left out: the pattern
            // then reads the same in the JSON text as in the value.
            Some(pattern) => format!(
                "/\"(?:{})\"/ & /\"[^\"\\\\\\x00-\\x1F]{{{min},{max}}}\"/",
                pattern.replace('/', "\\/")
            ),
            None => format!(
                "/\"(?:[^\"\\\\\\x00-\\x1F]|\\\\(?:[\"\\\\\\/bfnrt]|u[0-9a-fA-F]{{4}})){{{min},{max}}}\"/"
            ),
        };
        Node { expr: self.terminal(body), bytes: 2 + CHAR_BYTES * max }
    }

    fn integer(&mut self, map: &Map<String, Value>) -> Node {
        let low = bound(map, "minimum", "exclusiveMinimum", 1);
        let high = bound(map, "maximum", "exclusiveMaximum", -1);
        const LIMIT: i64 = 999_999_999_999_999;
        if let (Some(low), Some(high)) = (low, high) {
            if low <= high && low.abs() <= LIMIT && high.abs() <= LIMIT {
                // No whitespace around the number: the byte bound counts its digits only.
                let schema = serde_json::json!({
                    "type": "integer", "minimum": low, "maximum": high,
                    "x-guidance": {"whitespace_flexible": false},
                });
                let bytes = low.to_string().len().max(high.to_string().len());
                return Node { expr: self.rule(format!("%json {schema}")), bytes };
            }
        }
        let sign = if low.is_some_and(|low| low >= 0) { "" } else { "-?" };
        let body = format!("/{sign}(?:0|[1-9][0-9]{{0,{}}})/", INT_DIGITS - 1);
        Node { expr: self.terminal(body), bytes: 1 + INT_DIGITS }
    }

    fn number(&mut self, map: &Map<String, Value>) -> Node {
        let non_negative = map.get("minimum").and_then(Value::as_f64).is_some_and(|m| m >= 0.0);
        let sign = if non_negative { "" } else { "-?" };
        let body = format!(
            "/{sign}(?:0|[1-9][0-9]{{0,{}}})(?:\\.[0-9]{{1,{FRACTION_DIGITS}}})?/",
            INT_DIGITS - 1
        );
        Node { expr: self.terminal(body), bytes: 1 + INT_DIGITS + 1 + FRACTION_DIGITS }
    }

    fn object(&mut self, map: &Map<String, Value>, depth: usize) -> Result<Node, Unbounded> {
        let required: Vec<&str> = match map.get("required") {
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let properties = map.get("properties").and_then(Value::as_object);
        let Some(properties) = properties.filter(|p| !p.is_empty()) else {
            if let Some(values @ Value::Object(_)) = map.get("additionalProperties") {
                let value = self.value(values, depth + 1)?;
                let key = self.string(&Map::new());
                let key = Node { expr: key.expr, bytes: 2 + CHAR_BYTES * GENERIC_STRING };
                return Ok(self.map(&key, &value, MAX_ITEMS));
            }
            return Ok(Node { expr: "\"{}\"".into(), bytes: 2 });
        };
        // Each property as `"key": value`; one that cannot be bounded is left out when it is
        // optional.
        let mut members: Vec<(Node, bool)> = Vec::new();
        for (key, schema) in properties {
            let is_required = required.contains(&key.as_str());
            match self.value(schema, depth + 1) {
                Ok(value) => {
                    let head = format!("{}: ", Value::String(key.clone()));
                    let bytes = head.len() + value.bytes;
                    let expr = self.rule(format!("{} {}", lark_string(&head), value.expr));
                    members.push((Node { expr, bytes }, is_required));
                }
                Err(Unbounded) if is_required => return Err(Unbounded),
                Err(Unbounded) => {}
            }
        }
        // `after_i`: members i.. once one is written (each then follows ", ");
        // `first_i`: members i.. before any is written.
        let mut after = String::from("\"\"");
        let mut first = String::from("\"\"");
        for (member, is_required) in members.iter().rev() {
            let next_after = if *is_required {
                self.rule(format!("\", \" {} {after}", member.expr))
            } else {
                self.rule(format!("(\", \" {})? {after}", member.expr))
            };
            let next_first = if *is_required {
                self.rule(format!("{} {after}", member.expr))
            } else {
                self.rule(format!("{} {after} | {first}", member.expr))
            };
            after = next_after;
            first = next_first;
        }
        let bytes = 2 + members.iter().map(|(m, _)| m.bytes + 2).sum::<usize>();
        Ok(Node { expr: self.rule(format!("\"{{\" {first} \"}}\"")), bytes })
    }

    /// `{"key": value, …}` with at most `items` entries.
    fn map(&mut self, key: &Node, value: &Node, items: usize) -> Node {
        let entry = self.rule(format!("{} \": \" {}", key.expr, value.expr));
        let entry_bytes = key.bytes + 2 + value.bytes;
        let list = self.list(&entry, 0, items);
        Node {
            expr: self.rule(format!("\"{{\" {list} \"}}\"")),
            bytes: 2 + items * (entry_bytes + 2),
        }
    }

    fn array(&mut self, map: &Map<String, Value>, depth: usize) -> Result<Node, Unbounded> {
        let tuple = match (map.get("prefixItems"), map.get("items")) {
            (Some(Value::Array(items)), _) | (None, Some(Value::Array(items))) => Some(items),
            _ => None,
        };
        if let Some(items) = tuple {
            let mut nodes = Vec::new();
            for item in items.iter().take(MAX_ITEMS) {
                nodes.push(self.value(item, depth + 1)?);
            }
            let body = nodes.iter().map(|n| n.expr.as_str()).collect::<Vec<_>>().join(" \", \" ");
            let bytes = 2 + nodes.iter().map(|n| n.bytes + 2).sum::<usize>();
            return Ok(Node { expr: self.rule(format!("\"[\" {body} \"]\"")), bytes });
        }
        let item = match map.get("items") {
            Some(schema) => self.value(schema, depth + 1)?,
            None => self.any(1),
        };
        let count = |key: &str| {
            map.get(key).and_then(Value::as_u64).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        };
        let min = count("minItems").unwrap_or(0);
        if min > MAX_ITEMS {
            return Err(Unbounded);
        }
        let max = count("maxItems").unwrap_or(MAX_ITEMS).clamp(min, MAX_ITEMS);
        let list = self.list(&item.expr, min, max);
        Ok(Node {
            expr: self.rule(format!("\"[\" {list} \"]\"")),
            bytes: 2 + max * (item.bytes + 2),
        })
    }

    /// `min..=max` of `item` separated by ", " (a rule; `""` for none).
    fn list(&mut self, item: &str, min: usize, max: usize) -> String {
        if max == 0 {
            return "\"\"".into();
        }
        let rest = match (min.saturating_sub(1), max - 1) {
            (_, 0) => String::new(),
            (low, high) => format!(" (\", \" {item}){{{low},{high}}}"),
        };
        let some = format!("{item}{rest}");
        if min == 0 {
            self.rule(format!("({some})?"))
        } else {
            self.rule(some)
        }
    }

    /// A value of any type, containers nested at most `levels` deep.
    fn any(&mut self, levels: usize) -> Node {
        let string = self.string(&generic_string());
        let number = self.number(&Map::new());
        let mut node = Node {
            expr: self.rule(format!(
                "{} | {} | \"true\" | \"false\" | \"null\"",
                string.expr, number.expr
            )),
            bytes: string.bytes.max(number.bytes),
        };
        for _ in 0..levels {
            let list = self.list(&node.expr, 0, GENERIC_ITEMS);
            let array_bytes = 2 + GENERIC_ITEMS * (node.bytes + 2);
            let map = self.map(&string, &node, GENERIC_ITEMS);
            let body = format!("{} | \"[\" {list} \"]\" | {}", node.expr, map.expr);
            node = Node { expr: self.rule(body), bytes: array_bytes.max(map.bytes) };
        }
        node
    }

    /// Any JSON object, bounded (the grammar of a schema that cannot be bounded as written).
    fn any_object(&mut self) -> Node {
        let key = self.string(&generic_string());
        let value = self.any(1);
        self.map(&key, &value, MAX_ITEMS)
    }
}

/// The schema of a string in a value of any type.
fn generic_string() -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("maxLength".into(), Value::from(GENERIC_STRING));
    map
}

/// A value's JSON text as a Lark literal.
fn literal(value: &Value) -> Node {
    let text = value.to_string();
    Node { bytes: text.len(), expr: lark_string(&text) }
}

/// A Lark string literal.
pub(crate) fn lark_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// An integer bound: `inclusive`, or `exclusive` moved by `step`.
fn bound(map: &Map<String, Value>, inclusive: &str, exclusive: &str, step: i64) -> Option<i64> {
    let whole = |value: &Value| value.as_i64().or_else(|| value.as_f64().map(|f| f.trunc() as i64));
    let inclusive = map.get(inclusive).and_then(whole);
    let exclusive = map.get(exclusive).and_then(whole).map(|n| n.saturating_add(step));
    match (inclusive, exclusive) {
        (Some(a), Some(b)) if step > 0 => Some(a.max(b)),
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A local `$ref` (`#`, `#/$defs/x`, …) in `root`.
fn resolve<'v>(root: &'v Value, reference: &str) -> Option<&'v Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

/// `map` without `key`.
fn without(map: &Map<String, Value>, key: &str) -> Map<String, Value> {
    map.iter().filter(|(k, _)| k.as_str() != key).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Merges `part` into `into` (properties and required lists united, other keys added).
fn merge(into: &mut Map<String, Value>, part: &Map<String, Value>) {
    for (key, value) in part {
        match (key.as_str(), into.get_mut(key), value) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (name, schema) in theirs {
                    mine.entry(name.clone()).or_insert_with(|| schema.clone());
                }
            }
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                for name in theirs {
                    if !mine.contains(name) {
                        mine.push(name.clone());
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, _) => {
                into.insert(key.clone(), value.clone());
            }
        }
    }
}

/// A JSON Schema pattern without its `^` / `$` anchors (the grammar matches whole strings).
fn strip_anchors(pattern: &str) -> String {
    let pattern = pattern.strip_prefix('^').unwrap_or(pattern);
    match pattern.strip_suffix('$') {
        Some(rest) if !rest.ends_with('\\') => rest.to_owned(),
        _ => pattern.to_owned(),
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
