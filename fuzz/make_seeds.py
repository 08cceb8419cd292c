#!/usr/bin/python3
"""Writes the small valid seed files of the fuzz corpora (fuzz/corpus/<target>/): libFuzzer
mutates them into the hostile inputs. (fuzz/corpus/ir_text/ holds text IR instead: the inputs of
tests/filecheck/*.sjir without their comments, and the printed graph of a small CNN training
step with Adam, `to_text` of its loss and update values.) The two images come from the CIFAR-10 copy in
../shared/data (one JPEG of the train set, one PNG of the test set)."""
import gzip, json, os, struct

here = os.path.dirname(os.path.abspath(__file__))

def put(target, name, data):
    d = os.path.join(here, 'corpus', target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)

# IDX: magic 0 0 type rank, big-endian dims, data (u8 images [2, 3, 4], i32 labels [3], f32 [2])
images = bytes([0, 0, 0x08, 3]) + struct.pack('>3I', 2, 3, 4) + bytes(range(24))
put('idx', 'u8-images', images)
put('idx', 'u8-images.gz', gzip.compress(images))
put('idx', 'i32-labels', bytes([0, 0, 0x0C, 1]) + struct.pack('>I', 3) + struct.pack('>3i', 1, -2, 3))
put('idx', 'f32-vector', bytes([0, 0, 0x0D, 1]) + struct.pack('>I', 2) + struct.pack('>2f', 0.5, -1.0))

# CIFAR-10 binary: records of a label byte and 3072 pixel bytes
put('cifar', 'two-records', bytes([3]) + bytes(i % 256 for i in range(3072)) +
    bytes([9]) + bytes((7 * i) % 256 for i in range(3072)))

# safetensors: u64 header length, JSON header, data
def safetensors(tensors, metadata=None):
    header, data = {}, b''
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header['__metadata__'] = metadata
    h = json.dumps(header).encode()
    return struct.pack('<Q', len(h)) + h + data

put('safetensors', 'two-tensors', safetensors(
    {'w': ('F32', [2, 2], struct.pack('<4f', 1, 2, 3, 4)), 'step': ('I64', [], struct.pack('<q', 7))},
    {'epoch': '3'}))
put('safetensors', 'empty-and-bool', safetensors(
    {'e': ('F64', [0, 3], b''), 'b': ('BOOL', [3], bytes([1, 0, 1]))}))

# kernel-cache entries (fuzz/fuzz_kernel_cache.cpp): the first byte is the mode. 0: the entry file
# itself, here well-formed but for its checksum (KernelCache.h's schema 5, the target's fixed key);
# 1 and 2: a key length, the key and an object that the target wraps into an entry.
KEY = b'kernel sjk_fuzz\nfuzz'
OBJ = b'\x7fELF' + bytes(range(60))
put('kernel_cache', 'raw-entry', bytes([0]) + b'SJKCACHE' + struct.pack('<IQ', 5, len(KEY)) + KEY +
    struct.pack('<QQ', len(OBJ), 0x1234) + OBJ)
put('kernel_cache', 'wrapped', bytes([1, 8]) + b'key-bits' + OBJ)
put('kernel_cache', 'damaged', bytes([2, 4]) + b'abcd' + OBJ)
