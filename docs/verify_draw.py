#!/usr/bin/env python3
"""Checks a drawn lottery or presale selection from what the room publishes,
with the Python 3 standard library alone (docs/QUEUE.md, "Checking a draw").

    python3 verify_draw.py https://tickets.example.com/api/v1/events/premiere lottery
    python3 verify_draw.py https://tickets.example.com/api/v1/events/tour selection ID

ID (a ticket id: your draw's ticketId or your pass's sub; or a registration
id) prints that entry's draw and rank. An auditor given the room's
auth.draw_secret (in WAITROOM_DRAW_SECRET) checks the seed's derivation too.
"""
import hashlib
import hmac
import json
import os
import sys
import urllib.request

if len(sys.argv) not in (3, 4) or sys.argv[2] not in ("lottery", "selection"):
    sys.exit("usage: verify_draw.py EVENT_URL lottery|selection [ID]")
api, kind = sys.argv[1].rstrip("/"), sys.argv[2]
if "://" not in api:
    api = "http://" + api  # as curl takes localhost:8080/…


def get(path):
    with urllib.request.urlopen(f"{api}/{path}") as r:
        return r.read()


pub = json.loads(get(kind))
if "seed" not in pub:
    sys.exit(f"not drawn yet (commitment {pub['commitment']}, the draw at {pub.get('drawAt')})")
ids = get(f"{kind}/entries").decode("ascii").splitlines()
seed, digest = bytes.fromhex(pub["seed"]), bytes.fromhex(pub["entriesDigest"])


def fail(why):
    sys.exit(f"{kind} of {api}: {why}")


# The seed is the one committed before anyone was placed.
if hashlib.sha256(seed).hexdigest() != pub["commitment"]:
    fail("the seed does not hash to the commitment")
# The list is every frozen entry, no more: SHA-256 of the ids sorted
# bytewise, each followed by "\n", is the published digest.
if len(ids) != pub["entries"]:
    fail(f"{len(ids)} ids listed, {pub['entries']} entries")
if hashlib.sha256(b"".join(i.encode() + b"\n" for i in sorted(ids))).digest() != digest:
    fail("the list's digest is not entriesDigest")
# The key mixes the seed with every entry; an entry's draw is
# HMAC-SHA256(key, id); the list is in the draws' order, lowest first, the
# 32 bytes compared whole, then the ids bytewise.
key = hashlib.sha256(seed + digest).digest()


def draw(i):
    return hmac.new(key, i.encode(), hashlib.sha256).digest()


if sorted(ids, key=lambda i: (draw(i), i.encode())) != ids:
    fail("the list is not in the order of the draws")
# Only with the secret: the seed is HMAC-SHA256(secret, "waitroom draw\n" ‖
# event ‖ "\n" ‖ kind ‖ "\n" ‖ nonce).
secret = os.environ.get("WAITROOM_DRAW_SECRET")
if secret:
    event = api.rsplit("/", 1)[1]
    msg = f"waitroom draw\n{event}\n{kind}\n".encode() + bytes.fromhex(pub["nonce"])
    if hmac.new(secret.encode(), msg, hashlib.sha256).digest() != seed:
        fail("the seed is not the draw secret's over the nonce")
print(f"{kind} checked: {len(ids)} entries, commitment {pub['commitment']}")
if len(sys.argv) == 4:
    mine = sys.argv[3]
    if mine not in ids:
        fail(f"{mine} is not an entry")
    print(f"{mine}: draw {draw(mine).hex()}, rank {ids.index(mine) + 1}")
