package ledger

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
)

// Bounds of accounts and API keys.
const (
	// MaxAccountIDLen is the longest account ID: 1 to 64 characters of
	// [A-Za-z0-9._-] (ValidAccountID).
	MaxAccountIDLen = 64
	// MinAPIKeyLen and MaxAPIKeyLen bound an API key: printable ASCII
	// without spaces. IssueAPIKey's keys are 47 characters.
	MinAPIKeyLen = 16
	MaxAPIKeyLen = 256
	// APIKeyPrefix starts every key IssueAPIKey makes, so a key that leaks
	// into a log or a repository can be recognised (and scanned for).
	APIKeyPrefix = "ofk_"
)

// ErrUnknownAccount is what AddAPIKey returns for an account that does
// not exist.
var ErrUnknownAccount = errors.New("ledger: no such account (create it first: CreateAccount, or worker api-key -create)")

// ValidAccountID checks an account ID: 1 to MaxAccountIDLen characters of
// [A-Za-z0-9._-]. The ID is the principal that scopes the account's
// Idempotency-Keys, and is printed by the operator tools.
func ValidAccountID(id string) error {
	if id == "" || len(id) > MaxAccountIDLen {
		return fmt.Errorf("ledger: an account ID is 1 to %d characters, got %d", MaxAccountIDLen, len(id))
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("ledger: an account ID is made of letters, digits, '.', '_' and '-'; got %q", id)
		}
	}
	return nil
}

// validAPIKey checks the form of an API key, before it is hashed.
func validAPIKey(key string) bool {
	if len(key) < MinAPIKeyLen || len(key) > MaxAPIKeyLen {
		return false
	}
	for _, c := range []byte(key) {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// hashAPIKey is what the ledger keeps of an API key: the SHA-256 of its
// bytes. A plain, fast hash is enough for keys of 256 random bits (a
// password would need a slow, salted one): no dictionary reaches them.
func hashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// NewAPIKey makes a key: APIKeyPrefix and 32 random bytes, base64url.
func NewAPIKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return APIKeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// CreateAccount creates the account id, or leaves it as it is when it
// exists.
func (l *Ledger) CreateAccount(ctx context.Context, id string) error {
	if err := ValidAccountID(id); err != nil {
		return err
	}
	if _, err := l.exec(ctx, "INSERT INTO accounts (account_id, created_at) VALUES (?, ?) ON CONFLICT (account_id) DO NOTHING", id, l.millis()); err != nil {
		return fmt.Errorf("ledger: create account %s: %w", id, err)
	}
	return nil
}

// IssueAPIKey makes a new key for the account (NewAPIKey) and returns it:
// the only time it is seen, since the ledger keeps its hash alone. The
// account's other keys stay valid until revoked (RevokeAPIKey), so a
// client can move to the new key before the old one ends.
func (l *Ledger) IssueAPIKey(ctx context.Context, accountID string) (string, error) {
	key := NewAPIKey()
	if err := l.AddAPIKey(ctx, accountID, key); err != nil {
		return "", err
	}
	return key, nil
}

// AddAPIKey gives the account the key, which the caller chose (the -dev
// worker's public dev key); adding a key the account has is a no-op, and
// a key another account has is an error. The key is MinAPIKeyLen to
// MaxAPIKeyLen printable ASCII characters without spaces. Prefer
// IssueAPIKey, whose keys cannot be guessed.
func (l *Ledger) AddAPIKey(ctx context.Context, accountID, key string) error {
	if err := ValidAccountID(accountID); err != nil {
		return err
	}
	if !validAPIKey(key) {
		return fmt.Errorf("ledger: an API key is %d to %d printable ASCII characters without spaces", MinAPIKeyLen, MaxAPIKeyLen)
	}
	var exists int
	if err := l.queryRow(ctx, "SELECT count(*) FROM accounts WHERE account_id = ?", accountID).Scan(&exists); err != nil {
		return fmt.Errorf("ledger: look account %s up: %w", accountID, err)
	}
	if exists == 0 {
		return fmt.Errorf("%w: %s", ErrUnknownAccount, accountID)
	}
	h := hashAPIKey(key)
	if _, err := l.exec(ctx, "INSERT INTO api_keys (key_hash, account_id, created_at) VALUES (?, ?, ?) ON CONFLICT (key_hash) DO NOTHING",
		h, accountID, l.millis()); err != nil {
		return fmt.Errorf("ledger: add a key to account %s: %w", accountID, err)
	}
	var owner string
	if err := l.queryRow(ctx, "SELECT account_id FROM api_keys WHERE key_hash = ?", h).Scan(&owner); err != nil {
		return fmt.Errorf("ledger: add a key to account %s: %w", accountID, err)
	}
	if owner != accountID {
		return errors.New("ledger: this API key belongs to another account: issue a new one")
	}
	return nil
}

// RevokeAPIKey ends a key: from now on it authenticates no one. It
// reports whether the key was active.
func (l *Ledger) RevokeAPIKey(ctx context.Context, key string) (bool, error) {
	res, err := l.exec(ctx, "UPDATE api_keys SET revoked_at = ? WHERE key_hash = ? AND revoked_at = 0", l.millis(), hashAPIKey(key))
	if err != nil {
		return false, fmt.Errorf("ledger: revoke an API key: %w", err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// AccountByAPIKey is the account an active API key belongs to, looked up
// by the key's hash; ok is false for a key that is unknown, revoked or
// malformed.
func (l *Ledger) AccountByAPIKey(ctx context.Context, key string) (accountID string, ok bool, err error) {
	if !validAPIKey(key) {
		return "", false, nil
	}
	err = l.queryRow(ctx, "SELECT account_id FROM api_keys WHERE key_hash = ? AND revoked_at = 0", hashAPIKey(key)).Scan(&accountID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("ledger: look an API key up: %w", err)
	}
	return accountID, true, nil
}
