#!/usr/bin/perl
# A validator that is not the project's own: Perl's JSON::Validator (Debian's libjson-validator-perl). Reads on stdin
# {document, metaSchema, samples}; prints {problems} as JSON: where the document breaks the OpenAPI 3.1 schema, and
# where a response breaks the schema the document gives for its route, status and media type.
#
# JSON::Validator knows JSON Schema up to draft 2019-09; the OpenAPI 3.1 schema is written in 2020-12, whose only
# keyword it uses beyond 2019-09 is $dynamicRef to "#meta" (the schema objects' dialect, an object or a boolean in the
# default dialect). It is read here as that plain $ref.
use strict;
use warnings;
use JSON::PP;
use JSON::Validator::Schema::Draft201909;

my $json = JSON::PP->new->utf8->canonical;
my $input = $json->decode(do { local $/; <STDIN> });
my @problems;

sub dialect_as_2019 {
  my ($node) = @_;
  if (ref $node eq 'HASH') {
    $node->{'$schema'} = 'https://json-schema.org/draft/2019-09/schema' if exists $node->{'$schema'};
    if (exists $node->{'$dynamicRef'}) { delete $node->{'$dynamicRef'}; $node->{'$ref'} = '#/$defs/schema' }
    delete $node->{'$dynamicAnchor'};
    dialect_as_2019($_) for values %$node;
  } elsif (ref $node eq 'ARRAY') {
    dialect_as_2019($_) for @$node;
  }
}

my $meta = $input->{metaSchema};
dialect_as_2019($meta);
my $meta_validator = JSON::Validator::Schema::Draft201909->new($meta);
push @problems, "document: $_" for $meta_validator->validate($input->{document});

my $document = JSON::Validator::Schema::Draft201909->new($input->{document});

sub pointer { join '/', map { my $part = $_; $part =~ s/~/~0/g; $part =~ s!/!~1!g; $part } @_ }

for my $sample (@{$input->{samples}}) {
  my $where = "$sample->{method} $sample->{template} $sample->{status} $sample->{mediaType}";
  my $schema = $document->get('/' . pointer('paths', $sample->{template}, lc $sample->{method}, 'responses', $sample->{status}, 'content', $sample->{mediaType}, 'schema'));
  my $response = $document->get('/' . pointer('paths', $sample->{template}, lc $sample->{method}, 'responses', $sample->{status}));
  # A response without a body (202) is documented by its status alone.
  next if defined $response && $sample->{body} eq '' && !exists $response->{content};
  if (!defined $schema) { push @problems, "$where: not documented"; next }
  my $body = $sample->{body};
  if ($sample->{mediaType} eq 'application/json') {
    push @problems, "$where: $_" for $document->validate($json->decode($body), $schema);
    next;
  }
  # /mcp's stream carries JSON-RPC messages, whose contract is the MCP specification, not this document; a diff is text.
  if ($sample->{mediaType} eq 'text/plain' || $sample->{mediaType} eq 'text/x-diff' || $sample->{template} eq '/mcp') {
    push @problems, "$where: $_" for $document->validate($body, $schema);
    next;
  }
  # A run's stream: OpenAPI 3.1 has no item schema, so the document gives the stream the schema of its items, RunEvent,
  # which each NDJSON line or SSE frame's data must match.
  my @events = $sample->{mediaType} eq 'application/x-ndjson'
    ? grep { length } split /\n/, $body
    : map { /^data: (.*)$/m ? $1 : () } split /\n\n/, $body;
  push @problems, "$where: no event" unless @events;
  push @problems, "$where: event $_" for map { $document->validate($json->decode($_), $schema) } @events;
}

print $json->encode({ problems => [map {"$_"} @problems] });
