/**
 * The MD5 digests SQS returns, computed on the client side from what was sent.
 *
 * The SDK checks MD5OfMessageBody by itself; it does not check MD5OfMessageAttributes, so the scenarios
 * compare that one against this independent computation. SQS digests the attributes sorted by name, each
 * as length-prefixed fields (4-byte big-endian length, then the bytes): name, data type, one transport
 * byte (1 for String and Number, 2 for Binary), value.
 */
import { createHash } from "node:crypto";

function lengthPrefixed(bytes) {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return [length, bytes];
}

export function bodyMd5(body) {
  return createHash("md5").update(Buffer.from(body, "utf8")).digest("hex");
}

export function messageAttributesMd5(attributes) {
  const names = Object.keys(attributes).sort();
  const parts = [];
  for (const name of names) {
    const { DataType: dataType, StringValue: stringValue, BinaryValue: binaryValue } = attributes[name];
    parts.push(...lengthPrefixed(Buffer.from(name, "utf8")));
    parts.push(...lengthPrefixed(Buffer.from(dataType, "utf8")));
    if (dataType.startsWith("Binary")) {
      parts.push(Buffer.from([2]), ...lengthPrefixed(Buffer.from(binaryValue)));
    } else {
      parts.push(Buffer.from([1]), ...lengthPrefixed(Buffer.from(stringValue, "utf8")));
    }
  }
  return createHash("md5").update(Buffer.concat(parts)).digest("hex");
}

/** Attributes as JSON can carry them: binary values become base64 text. */
export function attributesForJson(attributes) {
  if (!attributes) {
    return null;
  }
  return Object.fromEntries(
    Object.entries(attributes).map(([name, { DataType, StringValue, BinaryValue }]) => [
      name,
      BinaryValue === undefined
        ? { DataType, StringValue }
        : { DataType, BinaryValueBase64: Buffer.from(BinaryValue).toString("base64") },
    ]),
  );
}
