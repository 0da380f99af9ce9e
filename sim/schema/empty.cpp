// Placeholder translation unit for a schema library without .proto files.
