"""A corpus for DetectSecretsFilter: passwords, passphrases, PINs and passcodes stated in prose in
many word orders, plus keys and tokens, must all be caught; benign chat (LoCoMo's turns, read
from the shared data folder when it exists, and sentences that talk about passwords without
giving one) must be kept. The false-positive count and rate are printed and bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_server.extraction.secrets import DetectSecretsFilter

# Read at test time, never copied into the repository (CC BY-NC 4.0, evaluation data).
LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev.json"
MAX_FALSE_POSITIVE_RATE = 0.01  # measured: 0 of 2,810

PASSWORDS = ("hunter2Xy!", "Tr0ub4dor&3", "s3cr3tPass", "Gu3st!2024", "Zq9#mP2q")
# {v}: the secret. Every order people use to state one.
PASSWORD_FORMS = (
    "my password is {v}",
    "My password is {v}.",
    "{v} is my password",
    "{v} is my password.",
    "password: {v}",
    "Password: {v}!",
    "pw={v}",
    "pwd = {v}",
    "I log into the VPN with {v} as my password.",
    "I log in with {v} as my password",
    "my login password? it's {v}",
    "use {v} as the passphrase",
    "Use '{v}' as the passphrase.",
    "the wifi password is `{v}`",
    'my password is "{v}"',
    "passcode? it's {v}",
    "my password's {v}",
    "the password I chose is {v}",
    "{v} is the wifi password",
    "wifi password for guests: {v}",
    "The root password for the VM is {v}, keep it safe.",
    "I changed my wifi password to {v} yesterday.",
    "{v}, that's my password",
    "the passphrase for the vault is {v}",
    "my passcode is {v}",
    "my email password is {v}",
    "my password for gmail is {v}",
    "the admin password? it is {v}",
    "my passphrase is '{v} horse battery'",
    "passcode={v}",
    "Password for the router -> {v}",
    "(password: {v})",
)
PIN_FORMS = (
    "the PIN for my card is {v}",
    "my pin is {v}",
    "My PIN is {v}.",
    "PIN {v}",
    "pin code: {v}",
    "my bank PIN? it's {v}",
    "{v} is my PIN",
    "the door passcode is {v}",
)
PINS = ("4821", "093517", "7731")
KEYS_AND_TOKENS = (
    "My AWS key is AKIAZ7XQ4LMN2PRT6WVB, please keep it.",
    "token ghp_" + "x7Kd9QmZ2LpR4tWv8NbC1YhJ6sFg3eUa5oPi",
    "Here is my OpenAI key sk-proj-" + "Q7fLm2Rt9XwK4bNc8VhZ1pJd6GsY3aTe5uWq0iPo",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcDEF123ghiJKL456",
    "the slack token is xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "connect to postgresql://admin:Pg5ecret77@db.internal:5432/app",
    "my card is 4111 1111 1111 1111",
    "stripe key sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
)
# Sentences that talk about passwords, PINs and keys but give none.
PASSWORD_TALK = (
    "I forgot my password yesterday",
    "the password policy needs 12 characters",
    "reset my password please",
    "My password is not working after the upgrade.",
    "Forgot password? Use the reset link, it expires in 15 minutes.",
    "I use 1Password as my password manager",
    "iPhone is my password manager.",
    "What is the password policy for GSQL users?",
    "Does the password need a digit?",
    "A passphrase is more secure than a password, isn't it?",
    "I changed my password last week.",
    "Can you help me reset my PIN?",
    "My PIN expired, so the bank sent a new card.",
    "The pin is loose on the hinge.",
    "She pinned the photo to the board at 4 pm.",
    "We passed the 2024 exam with honors.",
    "My password is too short, apparently.",
    "The password must contain a symbol.",
    "I keep my passwords in a vault.",
    "My password manager is Bitwarden.",
    "please remind me to change my password tomorrow",
    "Never share your password with anyone.",
    "Is my password safe with you?",
    "the passcode screen keeps popping up",
    "Use a long passphrase instead.",
    "Type your password and press Enter.",
    "My password expired on Monday.",
    "The wifi password is on the fridge.",
    "I typed the wrong password three times.",
    "Two-factor authentication replaces the SMS passcode.",
    "He asked for my password but I refused.",
    "Passwords should be rotated every 90 days.",
    "What's a good password length?",
    "The password field is empty.",
    "I'll send the password separately.",
    "My password has 16 characters.",
    "I set a new password for my account.",
    "The PIN pad at the store was broken.",
    "Where do I find my API key?",
    "Rotate the AWS keys every quarter.",
    "The token expired after an hour.",
    "My key is under the doormat.",
    "The password reset email never came.",
    "Please use a password with at least one digit.",
    "The login page asks for a passcode now.",
    "I passed 3 exams this semester.",
    "We went to Pinewood Studios in 2019.",
    "Did you change the wifi password?",
    "My old password was compromised.",
    "Your PIN must be 4 to 6 digits.",
)


def secret_forms() -> list[tuple[str, str]]:
    """(sentence, the secret it holds)."""
    forms = [
        (form.format(v=PASSWORDS[i % len(PASSWORDS)]), PASSWORDS[i % len(PASSWORDS)])
        for i, form in enumerate(PASSWORD_FORMS * 2)
    ]
    forms += [(form.format(v=pin), pin) for form in PIN_FORMS for pin in PINS[:2]]
    forms += [(text, text) for text in KEYS_AND_TOKENS]  # checked by count below
    return forms


def benign_sentences() -> list[str]:
    sentences = list(PASSWORD_TALK)
    if LOCOMO.exists():
        for sample in json.loads(LOCOMO.read_text()):
            conversation = sample["conversation"]
            for key, turns in conversation.items():
                if key.startswith("session_") and isinstance(turns, list):
                    sentences.extend(turn["text"] for turn in turns)
    return sentences


FILTER = DetectSecretsFilter()


def test_every_secret_form_is_caught() -> None:
    forms = secret_forms()
    assert len(forms) >= 80
    kept = []
    for sentence, secret in forms:
        redacted = FILTER.redact(sentence)
        scrubbed = FILTER.scrub(sentence)
        caught = redacted.secrets_found >= 1 and scrubbed.secrets_found >= 1
        if secret != sentence:
            caught = caught and secret not in redacted.text and secret not in scrubbed.text
        if not caught:
            kept.append(sentence)
    print(f"secrets caught: {len(forms) - len(kept)}/{len(forms)}")
    assert kept == []


def test_secret_forms_keep_the_sentence_around_the_placeholder() -> None:
    assert FILTER.redact("I log into the VPN with hunter2Xy! as my password.").text == (
        "I log into the VPN with [redacted: password] as my password."
    )
    assert FILTER.redact("my login password? it's Tr0ub4dor&3").text == (
        "my login password? it's [redacted: password]"
    )
    assert FILTER.redact("the PIN for my card is 4821.").text == (
        "the PIN for my card is [redacted: password]."
    )


def test_password_talk_without_a_value_is_kept() -> None:
    assert len(PASSWORD_TALK) >= 50
    flagged = [s for s in PASSWORD_TALK if FILTER.redact(s).secrets_found]
    assert flagged == []


def test_benign_corpus_false_positive_rate() -> None:
    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo not found at {LOCOMO}; only the hand-written part ran")
    sentences = benign_sentences()
    assert len(sentences) >= 300
    flagged = [s for s in sentences if FILTER.redact(s).secrets_found or FILTER.scrub(s).text != s]
    rate = len(flagged) / len(sentences)
    print(f"false positives: {len(flagged)}/{len(sentences)} ({rate:.2%}); e.g. {flagged[:5]}")
    assert rate <= MAX_FALSE_POSITIVE_RATE
