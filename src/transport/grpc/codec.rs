//! The protobuf codec of the generated service and client: prost's, except that a
//! message that does not decode is the client's fault. tonic's prost codec reports it
//! as `INTERNAL`; here it is `INVALID_ARGUMENT` with the ErrorInfo reason
//! `PARSE_ERROR` (the gRPC form of JSON-RPC's -32700), and the text says which
//! message type failed and why, without anything from the server's side.
//!
//! Before decoding, the message's fields are counted ([`super::field_count`]): a
//! request (a message whose name ends in `Request`: the server's side) over
//! [`MAX_REQUEST_VALUES`] is `INVALID_ARGUMENT` (reason `INVALID_PARAMS`)
//! naming the limit, before prost builds anything from it.

use std::marker::PhantomData;

use bytes::Buf;
use prost::{Message, Name};
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

use super::json::descriptor;
use super::{field_count, status};
use crate::error::A2aError;
use crate::protocol::value_count::{MAX_REQUEST_VALUES, TooManyValues};

/// A [`Codec`] encoding `T` and decoding `U` with prost.
#[derive(Debug, Clone)]
pub struct A2aCodec<T, U> {
    inner: ProstCodec<T, U>,
}

impl<T, U> Default for A2aCodec<T, U> {
    fn default() -> Self {
        Self {
            inner: ProstCodec::default(),
        }
    }
}

impl<T, U> Codec for A2aCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Name + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = A2aDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.inner.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        A2aDecoder {
            inner: self.inner.decoder(),
            _message: PhantomData,
        }
    }
}

/// Decodes one `U`; see the module docs for its errors.
#[derive(Debug, Clone)]
pub struct A2aDecoder<U> {
    inner: ProstDecoder<U>,
    _message: PhantomData<U>,
}

impl<U: Message + Name + Default> Decoder for A2aDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        let desc = descriptor::<U>().map_err(|e| status::from_error(&A2aError::internal(e)))?;
        let too_many =
            |e: TooManyValues| status::from_error(&A2aError::InvalidParams(e.to_string()));
        if !U::NAME.ends_with("Request") {
            // A client decoding an answer: the limit is on what a caller sends.
            return self
                .inner
                .decode(buf)
                .map_err(|status| not_valid::<U>(status.message()));
        }
        if buf.chunk().len() == buf.remaining() {
            field_count::check(buf.chunk(), &desc, MAX_REQUEST_VALUES).map_err(too_many)?;
            return self
                .inner
                .decode(buf)
                .map_err(|status| not_valid::<U>(status.message()));
        }
        // tonic hands over the message in one buffer, so this copy is not expected.
        let whole = buf.copy_to_bytes(buf.remaining());
        field_count::check(&whole, &desc, MAX_REQUEST_VALUES).map_err(too_many)?;
        U::decode(whole)
            .map(Some)
            .map_err(|e| not_valid::<U>(&e.to_string()))
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.inner.buffer_settings()
    }
}

/// The `PARSE_ERROR` status of a `U` that did not decode, `why` being prost's reason.
fn not_valid<U>(why: &str) -> Status {
    status::from_error(&A2aError::ParseError(format!(
        "the message is not a valid {}: {why}",
        message_name::<U>()
    )))
}

/// The proto message name of `U` as Rust spells it (`SendMessageRequest`).
fn message_name<U>() -> &'static str {
    let full = std::any::type_name::<U>();
    full.rsplit("::").next().unwrap_or(full)
}
