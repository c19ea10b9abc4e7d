-- Board sign-in through an OpenID Connect provider. A human signed in that way is keyed on the
-- issuer and the subject together, so one subject at two providers is two humans.
ALTER TABLE humans
  ADD COLUMN oidc_issuer  text,
  ADD COLUMN oidc_subject text,
  ADD CONSTRAINT humans_oidc_identity_whole CHECK ((oidc_issuer IS NULL) = (oidc_subject IS NULL));
CREATE UNIQUE INDEX humans_oidc_identity_idx ON humans (oidc_issuer, oidc_subject) WHERE oidc_subject IS NOT NULL;

-- The board's vend form carries a one-time id: sending the same form twice (a reload of the
-- answer page, a double click) vends one endpoint, not two. The value is "<owner human id>:<form id>".
ALTER TABLE endpoints ADD COLUMN vend_request text;
CREATE UNIQUE INDEX endpoints_vend_request_idx ON endpoints (vend_request) WHERE vend_request IS NOT NULL;
