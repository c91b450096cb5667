//! Typed reads of GGUF metadata: every key the crate uses is checked for presence and type,
//! with an error that names the key.

use crate::LocalError;
use candle_core::quantized::gguf_file::Value;
use std::collections::HashMap;

/// GGUF metadata, as read from a file's header.
pub(crate) struct Metadata<'a>(pub(crate) &'a HashMap<String, Value>);

impl<'a> Metadata<'a> {
    fn error(key: &str, message: impl Into<String>) -> LocalError {
        LocalError::Metadata { key: key.to_owned(), message: message.into() }
    }

    fn required(&self, key: &str) -> Result<&'a Value, LocalError> {
        self.0.get(key).ok_or_else(|| Self::error(key, "missing"))
    }

    /// A string value, or `None` when the key is absent.
    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<&'a str>, LocalError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.as_str())),
            Some(other) => Err(Self::error(key, format!("expected a string, got {other:?}"))),
        }
    }

    /// A required string value.
    pub(crate) fn str(&self, key: &str) -> Result<&'a str, LocalError> {
        self.opt_str(key)?.ok_or_else(|| Self::error(key, "missing"))
    }

    /// An unsigned integer value, or `None` when the key is absent.
    pub(crate) fn opt_u32(&self, key: &str) -> Result<Option<u32>, LocalError> {
        self.0
            .get(key)
            .map(|value| {
                as_u32(value).ok_or_else(|| {
                    Self::error(key, format!("expected an unsigned 32-bit integer, got {value:?}"))
                })
            })
            .transpose()
    }

    /// A boolean value, or `None` when the key is absent.
    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, LocalError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Value::Bool(value)) => Ok(Some(*value)),
            Some(other) => Err(Self::error(key, format!("expected a boolean, got {other:?}"))),
        }
    }

    /// A required array of strings.
    pub(crate) fn strings(&self, key: &str) -> Result<Vec<&'a str>, LocalError> {
        let Value::Array(items) = self.required(key)? else {
            return Err(Self::error(key, "expected an array"));
        };
        items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::String(text) => Ok(text.as_str()),
                other => Err(Self::error(key, format!("item {index} is not a string: {other:?}"))),
            })
            .collect()
    }

    /// An array of integers, or `None` when the key is absent.
    pub(crate) fn opt_ints(&self, key: &str) -> Result<Option<Vec<i64>>, LocalError> {
        let Some(value) = self.0.get(key) else { return Ok(None) };
        let Value::Array(items) = value else {
            return Err(Self::error(key, "expected an array"));
        };
        items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                as_i64(item).ok_or_else(|| {
                    Self::error(key, format!("item {index} is not an integer: {item:?}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// An array of numbers as `f32`, or `None` when the key is absent.
    pub(crate) fn opt_floats(&self, key: &str) -> Result<Option<Vec<f32>>, LocalError> {
        let Some(value) = self.0.get(key) else { return Ok(None) };
        let Value::Array(items) = value else {
            return Err(Self::error(key, "expected an array"));
        };
        items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::F32(v) => Ok(*v),
                Value::F64(v) => Ok(*v as f32),
                other => as_i64(other).map(|v| v as f32).ok_or_else(|| {
                    Self::error(key, format!("item {index} is not a number: {other:?}"))
                }),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

fn as_i64(value: &Value) -> Option<i64> {
    Some(match value {
        Value::U8(v) => i64::from(*v),
        Value::I8(v) => i64::from(*v),
        Value::U16(v) => i64::from(*v),
        Value::I16(v) => i64::from(*v),
        Value::U32(v) => i64::from(*v),
        Value::I32(v) => i64::from(*v),
        Value::U64(v) => i64::try_from(*v).ok()?,
        Value::I64(v) => *v,
        _ => return None,
    })
}

fn as_u32(value: &Value) -> Option<u32> {
    as_i64(value).and_then(|v| u32::try_from(v).ok())
}
