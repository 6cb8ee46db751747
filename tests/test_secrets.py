"""DetectSecretsFilter: sentences holding secrets go, everything else stays byte for byte.

Every secret here is fake, generated with the right shape from a seeded random source."""

from __future__ import annotations

import base64
import json
import logging
import random
import string
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from memory_server.extraction.secrets import DetectSecretsFilter
from memory_server.memory.ports import SecretFilter

_rng = random.Random(20240501)

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"


def rand(alphabet: str, n: int) -> str:
    # Make sure the shapes that real keys always have (digits, both cases) are present.
    while True:
        value = "".join(_rng.choice(alphabet) for _ in range(n))
        needs = [
            (set(string.digits) & set(alphabet), string.digits),
            (set(string.ascii_lowercase) & set(alphabet), string.ascii_lowercase),
            (set(string.ascii_uppercase) & set(alphabet), string.ascii_uppercase),
        ]
        if all(not present or any(c in chars for c in value) for present, chars in needs):
            return value


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def make_jwt(claims: dict[str, object]) -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims).encode())
    return f"{header}.{payload}.{rand(B64URL, 43)}"


def make_pem(label: str, lines: int = 6) -> str:
    body = "\n".join(rand(B64, 64) for _ in range(lines)) + "\n" + rand(B64, 20) + "=="
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


OPENAI_LEGACY = f"sk-{rand(ALNUM, 20)}T3BlbkFJ{rand(ALNUM, 20)}"
OPENAI_PROJECT = f"sk-proj-{rand(B64URL, 120)}"
ANTHROPIC = f"sk-ant-api03-{rand(B64URL, 93)}AA"
GITHUB_CLASSIC = f"ghp_{rand(ALNUM, 36)}"
GITHUB_OAUTH = f"gho_{rand(ALNUM, 36)}"
GITHUB_FINE = f"github_pat_11{rand(ALNUM, 20)}_{rand(ALNUM, 59)}"
SLACK_BOT = f"xoxb-{rand(string.digits, 12)}-{rand(string.digits, 13)}-{rand(ALNUM, 24)}"
SLACK_HOOK = (
    f"https://hooks.slack.com/services/T{rand(ALNUM.upper(), 8)}/B{rand(ALNUM.upper(), 10)}/"
    f"{rand(ALNUM, 24)}"
)
STRIPE_LIVE = f"sk_live_{rand(ALNUM, 24)}"
STRIPE_TEST = f"sk_test_{rand(ALNUM, 99)}"
GOOGLE_API = f"AIza{rand(B64URL, 35)}"
GOOGLE_OAUTH_SECRET = f"GOCSPX-{rand(B64URL, 28)}"
WEAVIATE_KEY = rand(ALNUM, 40)
HEX_SECRET = rand(HEX, 32)
BEARER_OPAQUE = rand(B64URL, 40)
JWT_BEARER = make_jwt({"sub": "u_1029", "iat": 1714566600, "scope": "graph:read"})
JWT_COOKIE = make_jwt({"sid": "c9a1", "exp": 1714570200})
AWS_KEY_ID = "AKIA" + rand(string.ascii_uppercase + string.digits, 16)
AWS_SECRET = rand(B64, 40)
AWS_KEY_ID_2 = "ASIA" + rand(string.ascii_uppercase + string.digits, 16)
AWS_SECRET_2 = rand(B64, 40)
AZURE_ACCOUNT_KEY = rand(B64, 86) + "=="
AZURE_CLIENT_SECRET = f"{rand(ALNUM, 3)}8Q~{rand(ALNUM + '_~.-', 34)}"
AZURE_SAS_SIG = rand(ALNUM, 40) + "%3D"
GCP_KEY_ID = rand(HEX, 40)
GCP_PRIVATE_KEY = make_pem("PRIVATE KEY", 3).replace("\n", "\\n")
DB_PASSWORD = "Gr4phR4g!2024"
PG_PASSWORD = rand(ALNUM, 16)
MONGO_PASSWORD = rand(ALNUM, 12)
RSA_KEY = make_pem("RSA PRIVATE KEY")
OPENSSH_KEY = make_pem("OPENSSH PRIVATE KEY", 4)
EC_KEY = make_pem("EC PRIVATE KEY", 2)
ENCRYPTED_KEY = make_pem("ENCRYPTED PRIVATE KEY", 3)
SENDGRID = f"SG.{rand(B64URL, 22)}.{rand(B64URL, 43)}"
GITLAB = f"glpat-{rand(B64URL, 20)}"
HUGGINGFACE = f"hf_{rand(ALNUM, 34)}"
NPM = f"npm_{rand(ALNUM, 36)}"
TELEGRAM = f"{rand(string.digits, 10)}:{rand(B64URL, 35)}"
GENERIC_TOKEN = rand(B64, 40)
API_KEY_HEX = rand(HEX, 32)


@dataclass(frozen=True)
class Sample:
    name: str
    sentence: str  # may span lines
    secrets: tuple[str, ...]  # what must not survive
    count: int = 1


SECRET_SAMPLES = [
    Sample(
        "openai-legacy",
        f"My OpenAI key is {OPENAI_LEGACY}, use it for embeddings.",
        (OPENAI_LEGACY,),
    ),
    Sample(
        "openai-project",
        f"Use {OPENAI_PROJECT} as OPENAI_API_KEY for the extractor.",
        (OPENAI_PROJECT,),
    ),
    Sample("anthropic", f"The Anthropic key for the summarizer is {ANTHROPIC}.", (ANTHROPIC,)),
    Sample(
        "github-classic",
        f"Push with {GITHUB_CLASSIC} when CI asks for credentials.",
        (GITHUB_CLASSIC,),
    ),
    Sample("github-oauth", f"The OAuth app handed me {GITHUB_OAUTH} after login.", (GITHUB_OAUTH,)),
    Sample("github-fine-grained", f"Here is a fine-grained PAT: {GITHUB_FINE}", (GITHUB_FINE,)),
    Sample("slack-bot", f"Our Slack bot token is {SLACK_BOT}.", (SLACK_BOT,)),
    Sample(
        "slack-webhook", f"Alerts are posted to {SLACK_HOOK} for the fraud team.", (SLACK_HOOK,)
    ),
    Sample("stripe-live", f"Charge cards with {STRIPE_LIVE} in production.", (STRIPE_LIVE,)),
    Sample("stripe-test", f"For staging the Stripe key is {STRIPE_TEST} now.", (STRIPE_TEST,)),
    Sample("google-api", f"The Maps key {GOOGLE_API} is restricted to our domain.", (GOOGLE_API,)),
    Sample(
        "google-oauth",
        f"The OAuth client secret is {GOOGLE_OAUTH_SECRET} for the web app.",
        (GOOGLE_OAUTH_SECRET,),
    ),
    Sample(
        "generic-api-key",
        f"The Weaviate API key is {WEAVIATE_KEY} for the cluster.",
        (WEAVIATE_KEY,),
    ),
    Sample(
        "hex-secret",
        f"Set the TigerGraph secret to {HEX_SECRET} before running RESTPP.",
        (HEX_SECRET,),
    ),
    Sample(
        "curl-bearer",
        f'Run curl -H "Authorization: Bearer {BEARER_OPAQUE}" against /query.',
        (BEARER_OPAQUE,),
    ),
    Sample("header-bearer-jwt", f"Authorization: Bearer {JWT_BEARER}", (JWT_BEARER,)),
    Sample("jwt", f"The session cookie holds {JWT_COOKIE} right now.", (JWT_COOKIE,)),
    Sample("password-prose", "My password is hunter2!", ("hunter2",)),
    Sample("password-colon", "password: Tr0ub4dor&3", ("Tr0ub4dor&3",)),
    Sample(
        "pwd-assignment",
        "Log in as admin with pwd=s3cr3tPass and check the graph.",
        ("s3cr3tPass",),
    ),
    Sample(
        "passphrase",
        "The passphrase is 'correct horse battery staple' for the vault.",
        ("correct horse",),
    ),
    Sample("dotenv", f"DB_PASSWORD={DB_PASSWORD}", (DB_PASSWORD,)),
    Sample(
        "password-changed", "I changed my wifi password to Summer2024 yesterday.", ("Summer2024",)
    ),
    Sample(
        "root-password",
        "The root password for the VM is Tr1cky&Pass, keep it safe.",
        ("Tr1cky&Pass",),
    ),
    Sample(
        "cypher-password",
        "CREATE (u:User {name: 'ana', password: 'Xk9#mP2q'}) RETURN u",
        ("Xk9#mP2q",),
    ),
    Sample("rsa-pem", f"Here is the deploy key: {RSA_KEY}", (RSA_KEY, RSA_KEY.split("\n")[3])),
    Sample("openssh-pem", f"{OPENSSH_KEY} (my id_ed25519)", (OPENSSH_KEY.split("\n")[2],)),
    Sample("ec-pem-inline", f"Key: {EC_KEY}", (EC_KEY.split("\n")[1],)),
    Sample("pkcs8-encrypted-pem", ENCRYPTED_KEY, (ENCRYPTED_KEY.split("\n")[2],)),
    Sample("aws-key-id", f"The access key id is {AWS_KEY_ID}.", (AWS_KEY_ID,)),
    Sample("aws-secret", f"aws_secret_access_key = {AWS_SECRET}", (AWS_SECRET,)),
    Sample(
        "aws-pair",
        f"Use {AWS_KEY_ID_2} with secret {AWS_SECRET_2} for the S3 export.",
        (AWS_KEY_ID_2, AWS_SECRET_2),
        count=2,
    ),
    Sample(
        "azure-storage",
        "DefaultEndpointsProtocol=https;AccountName=graphdumps;"
        f"AccountKey={AZURE_ACCOUNT_KEY};EndpointSuffix=core.windows.net",
        (AZURE_ACCOUNT_KEY,),
    ),
    Sample(
        "azure-client-secret",
        f"The service principal secret is {AZURE_CLIENT_SECRET} today.",
        (AZURE_CLIENT_SECRET,),
    ),
    Sample(
        "azure-sas",
        "Download https://graphdumps.blob.core.windows.net/exports/edges.csv?sv=2022-11-02"
        f"&ss=b&srt=o&sp=r&se=2025-01-01T00:00:00Z&spr=https&sig={AZURE_SAS_SIG} tonight.",
        (AZURE_SAS_SIG,),
    ),
    Sample(
        "gcp-service-account",
        '{"type": "service_account", "project_id": "graph-prod", '
        f'"private_key_id": "{GCP_KEY_ID}", "private_key": "{GCP_PRIVATE_KEY}", '
        '"client_email": "loader@graph-prod.iam.gserviceaccount.com"}',
        (GCP_KEY_ID, GCP_PRIVATE_KEY[40:80]),
        count=2,
    ),
    Sample(
        "postgres-url",
        f"Connect with postgresql://graph_admin:{PG_PASSWORD}@db.internal:5432/memory please.",
        (PG_PASSWORD,),
    ),
    Sample(
        "mongodb-url",
        f"The URI is mongodb+srv://loader:{MONGO_PASSWORD}@cluster0.example.net/graph.",
        (MONGO_PASSWORD,),
    ),
    Sample(
        "visa-spaced", "My card is 4111 1111 1111 1111, expiry 12/27.", ("4111 1111 1111 1111",)
    ),
    Sample(
        "mastercard-dashed", "Charge 5555-5555-5555-4444 for the renewal.", ("5555-5555-5555-4444",)
    ),
    Sample(
        "amex-contiguous",
        "The company Amex 378282246310005 pays for hosting.",
        ("378282246310005",),
    ),
    Sample("sendgrid", f"Mail goes out through SendGrid with {SENDGRID} as key.", (SENDGRID,)),
    Sample("gitlab", f"The GitLab runner uses {GITLAB} to clone.", (GITLAB,)),
    Sample("huggingface", f"Download the model with {HUGGINGFACE} from the hub.", (HUGGINGFACE,)),
    Sample("npm", f"Publish with {NPM} from the release job.", (NPM,)),
    Sample("telegram", f"The alert bot answers to {TELEGRAM} on Telegram.", (TELEGRAM,)),
    Sample("basic-auth-header", "Authorization: Basic dXNlcjpodW50ZXIy", ("dXNlcjpodW50ZXIy",)),
    Sample("token-colon", f"Here's the token: {GENERIC_TOKEN}", (GENERIC_TOKEN,)),
    Sample("short-pass-env", "MYSQL_PASS=kj3h4k5j", ("kj3h4k5j",)),
    Sample(
        "redis-url-no-user",
        f"Cache at redis://:{PG_PASSWORD}@cache:6379/0 is full.",
        (PG_PASSWORD,),
    ),
    Sample("mysql-cli", "Run mysql -u root --password=Sup3rS3cret graphdb now.", ("Sup3rS3cret",)),
    Sample("api-key-header", f"Send X-API-Key: {API_KEY_HEX} with each call.", (API_KEY_HEX,)),
    Sample("diners-grouped", "Diners 3056 930902 5904 is the old card.", ("3056 930902 5904",)),
]

BEFORE = "We loaded the Finance graph last week."
AFTER = "Which accounts have the highest PageRank now?"

BENIGN = [
    "Which accounts did acct_4471 transfer money to in the last 30 days?",
    "Continue conversation 3f1c9a2e-8b7d-4e6f-9a01-2b3c4d5e6f70 from yesterday.",
    "The bug was fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8, touching the loader.",
    "Short hash a1b2c3d is the commit that broke token counting.",
    "How do I reset a password for a TigerGraph user?",
    "What is the password policy for GSQL users? Does the password need a digit?",
    "Password: must contain at least 12 characters and one digit.",
    "The card number 4111 1111 1111 1112 fails the Luhn check, as it should.",
    "Order 4000123412341235 shipped on 2024-05-01T12:30:00Z.",
    "Epoch 1714566600000 is when the ingestion job started.",
    "See https://docs.tigergraph.com/gsql-ref/current/querying/accumulators for details.",
    "Connect to postgresql://localhost:5432/memory without a password locally.",
    "Use postgresql://user:<password>@db.internal:5432/memory as the template.",
    "Set password: <your-password> in the config template.",
    "Run export OPENAI_API_KEY=$OPENAI_API_KEY before starting the server.",
    "The API key should be read from the OPENAI_API_KEY environment variable, never hard-coded.",
    "Use the token_budget setting of 8000 tokens for the context window.",
    "The token count was 1532 and max_tokens is 4096.",
    "Base64 of 'hello world' is aGVsbG8gd29ybGQ=, so why does my decoder fail?",
    "Why does atob('SGVsbG8sIFdvcmxkIQ==') throw in Node?",
    "The embedding model is text-embedding-3-small with dimension 1536.",
    "INSTALL QUERY ALL; RUN QUERY pagerank(0.85, 20)",
    "Vertex Person has primary_id name STRING and attributes age INT.",
    "Edge TRANSFER(FROM Account, TO Account, amount DOUBLE, ts DATETIME) is directed.",
    "Request req_01HV8Z3K5Q9Y2W7XFJ4T6N0M1P failed with DEADLINE_EXCEEDED.",
    "The sha256 digest is e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.",
    "What does KeyError: 'vertex_type' mean in pyTigerGraph?",
    "Summarize our discussion about the fraud ring around account 7781-2234.",
    "Her secret: she prefers dark mode in the dashboard.",
    "Log line: 2024-05-01 12:30:00,123 INFO graph=Finance vertices=1204553 edges=3211020",
    "docker run -p 14240:14240 tigergraph/tigergraph:3.10.1",
    "ssh tigergraph@10.0.0.12 -i ~/.ssh/id_rsa",
    "MATCH (p:Person)-[:KNOWS]->(f:Person) WHERE p.id = 'u_1029' RETURN f.name LIMIT 10",
    "Import from /home/tigergraph/data/transactions_2024_05.csv with the loading job.",
    "Python: G = nx.from_pandas_edgelist(df, 'src', 'dst', edge_attr='amount')",
    "A passphrase is more secure than a password, isn't it?",
    "My password manager is 1Password; does that matter?",
    "The secret santa graph has 42 people and 42 GIFTS_TO edges.",
    "Use gpt-4o-mini-2024-07-18 for extraction and text-embedding-3-large for recall.",
    "The JWT header usually starts with eyJ, which is base64 for '{\"'.",
    "Phone 555-0142 and zip 94107 belong to the Oakland office.",
    "Should the private key be stored in Vault or in Kubernetes secrets?",
    "Set the session token TTL to 3600 seconds and refresh at 80%.",
    "Why is my sk-learn pipeline slower than the GSQL query?",
    "The GetConversationHistoryV2Request call failed with RESOURCE_EXHAUSTED after 30s.",
    "Run TestGraphRagMemoryService2 again on WindowsServer2022Datacenter.",
    "Traceback: /usr/local/lib/python3.11/site-packages/pyTigerGraph/pyTigerGraphBase.py line 412",
    "Add ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl to VM.",
    "PASSWORD_HASHERS = ['django.contrib.auth.hashers.Argon2PasswordHasher']",
    "CREATE VERTEX User (PRIMARY_ID id STRING, password STRING, email STRING)",
    "class Settings(BaseModel): password: str",
    "My password is not working after the upgrade.",
    "Connect with password=None when the server runs in trust mode.",
    "api_key: ${OPENAI_API_KEY}",
    "The MD5 hash 5d41402abc4b2a76b9719d911017c592 matches the file.",
    "Forgot password? Use the reset link, it expires in 15 minutes.",
]

GSQL_SNIPPET = """CREATE QUERY top_spenders(INT k = 10) FOR GRAPH Finance {
  SumAccum<DOUBLE> @total;
  start = {Account.*};
  result = SELECT a FROM start:a -(TRANSFER>:t)- Account:b
           ACCUM a.@total += t.amount
           ORDER BY a.@total DESC
           LIMIT k;
  PRINT result[result.id, result.@total];
}"""


@pytest.fixture(scope="module")
def scrubber() -> DetectSecretsFilter:
    return DetectSecretsFilter()


def test_implements_the_port(scrubber: DetectSecretsFilter) -> None:
    port: SecretFilter = scrubber
    assert port.scrub("hello").text == "hello"


def test_there_are_enough_samples() -> None:
    assert len(SECRET_SAMPLES) >= 30
    assert len(BENIGN) >= 25


@pytest.mark.parametrize("sample", SECRET_SAMPLES, ids=lambda s: s.name)
def test_secret_goes_with_its_sentence(scrubber: DetectSecretsFilter, sample: Sample) -> None:
    result = scrubber.scrub(f"{BEFORE} {sample.sentence}\n{AFTER}")
    assert result.text == f"{BEFORE}\n{AFTER}"
    assert result.secrets_found == sample.count
    for secret in sample.secrets:
        assert secret not in result.text


@pytest.mark.parametrize("sample", SECRET_SAMPLES, ids=lambda s: s.name)
def test_message_that_is_only_a_secret_becomes_empty(
    scrubber: DetectSecretsFilter, sample: Sample
) -> None:
    result = scrubber.scrub(sample.sentence)
    assert result.text == ""
    assert result.secrets_found == sample.count


@pytest.mark.parametrize("text", BENIGN)
def test_ordinary_text_survives(scrubber: DetectSecretsFilter, text: str) -> None:
    assert scrubber.scrub(text) == scrubber.scrub(text)  # deterministic
    result = scrubber.scrub(text)
    assert result.text == text
    assert result.secrets_found == 0


def test_ordinary_conversation_survives_unchanged(scrubber: DetectSecretsFilter) -> None:
    text = "\n".join(BENIGN) + "\n\n" + GSQL_SNIPPET + "\n"
    result = scrubber.scrub(text)
    assert result.text == text
    assert result.secrets_found == 0


def test_counts_each_secret_once(scrubber: DetectSecretsFilter) -> None:
    text = (
        f"First key {GITHUB_CLASSIC} here. Then {STRIPE_LIVE} there.\n"
        f"Authorization: Bearer {JWT_BEARER}\n"
        "My password is hunter2! Fine otherwise."
    )
    result = scrubber.scrub(text)
    # The bearer JWT is reported by several detectors but is one secret.
    assert result.secrets_found == 4
    assert result.text == "Fine otherwise."


def test_pem_block_spanning_lines_goes_whole(scrubber: DetectSecretsFilter) -> None:
    text = (
        "Can you check why the loader fails?\n"
        f"It uses this key:\n{RSA_KEY}\n"
        "After that the GSQL job runs.\n\n"
        "Thanks!"
    )
    result = scrubber.scrub(text)
    assert result.secrets_found == 1
    # "It uses this key:" holds no secret, so it stays.
    assert result.text == (
        "Can you check why the loader fails?\nIt uses this key:\n"
        "After that the GSQL job runs.\n\nThanks!"
    )
    for line in RSA_KEY.split("\n"):
        assert line not in result.text


def test_truncated_pem_block_runs_to_the_end(scrubber: DetectSecretsFilter) -> None:
    truncated = "\n".join(RSA_KEY.split("\n")[:4])
    result = scrubber.scrub(f"Why does this key not load?\n{truncated}")
    assert result == scrubber.scrub(f"Why does this key not load?\n{truncated}")
    assert result.text == "Why does this key not load?"
    assert result.secrets_found == 1


def test_blank_lines_and_indentation_are_kept_tidy(scrubber: DetectSecretsFilter) -> None:
    text = "Intro paragraph.\n\nMy password is hunter2!\n\n  indented code line\nLast line."
    result = scrubber.scrub(text)
    assert result.text == "Intro paragraph.\n\n  indented code line\nLast line."
    middle = scrubber.scrub(f"    First. The key is {GITHUB_OAUTH}. Third one.")
    assert middle.text == "    First. Third one."


def test_crlf_text_keeps_its_line_endings(scrubber: DetectSecretsFilter) -> None:
    text = f"First line.\r\nKeep this. The key is {GITHUB_OAUTH}.\r\nLast line.\r\n"
    assert scrubber.scrub(text).text == "First line.\r\nKeep this.\r\nLast line.\r\n"


def test_empty_and_secret_free_text(scrubber: DetectSecretsFilter) -> None:
    assert scrubber.scrub("").text == ""
    assert scrubber.scrub("").secrets_found == 0
    assert scrubber.scrub("\n\n").text == "\n\n"


def test_scrub_is_thread_safe(scrubber: DetectSecretsFilter) -> None:
    texts = [f"{BEFORE} {s.sentence}\n{AFTER}" for s in SECRET_SAMPLES] + BENIGN
    expected = [scrubber.scrub(text) for text in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(3):
            assert list(pool.map(scrubber.scrub, texts)) == expected


def _four_kb_message() -> str:
    parts: list[str] = []
    index = 0
    while sum(len(p) + 1 for p in parts) < 4096:
        parts.append(BENIGN[index % len(BENIGN)])
        if index % 9 == 4:
            parts.append(SECRET_SAMPLES[index % len(SECRET_SAMPLES)].sentence)
        index += 1
    return "\n".join(parts)[:4096]


@pytest.mark.parametrize("separator", ["\n", " "], ids=["lines", "one-line"])
def test_a_4kb_message_scrubs_fast(scrubber: DetectSecretsFilter, separator: str) -> None:
    text = _four_kb_message().replace("\n", separator)
    assert 4000 <= len(text) <= 4096
    assert scrubber.scrub(text).secrets_found > 0
    runs = 10
    started = time.perf_counter()
    for _ in range(runs):
        scrubber.scrub(text)
    average = (time.perf_counter() - started) / runs
    assert average < 0.050, f"{average * 1000:.1f} ms per 4 KB"


def test_secrets_never_reach_the_log(
    scrubber: DetectSecretsFilter, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for sample in SECRET_SAMPLES:
        scrubber.scrub(f"{BEFORE} {sample.sentence}\n{AFTER}")
    ours = [r for r in caplog.records if r.name == "memory_server.extraction.secrets"]
    assert len(ours) == len(SECRET_SAMPLES)  # it does log, so the check below means something
    logged = "\n".join(f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records)
    for sample in SECRET_SAMPLES:
        for secret in sample.secrets:
            assert secret not in logged
    assert BEFORE not in logged  # nor the surrounding text


def test_importing_leaves_warnings_alone() -> None:
    # detect-secrets turns on logging.captureWarnings at import; the module turns it off again.
    code = (
        "import warnings; before = warnings.showwarning; "
        "import memory_server.extraction.secrets; "
        "assert warnings.showwarning is before, 'warnings are rerouted to logging'"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
