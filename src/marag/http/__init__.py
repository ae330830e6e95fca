"""HTTP plumbing the three servers share (serve-llm, serve-retriever, serve): the OpenAPI
error and streaming descriptions, and the request body limit. Ground floor: it imports no
other part of marag, so every server can use it."""
