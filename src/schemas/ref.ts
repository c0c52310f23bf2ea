import { Type, type SchemaOptions, type Static, type TSchema } from '@sinclair/typebox'

/**
 * A $ref to one of the shared schemas that keeps the static type, so handlers stay typed (TypeBox 0.34 Refs are
 * untyped). Each of them declares an $id; TypeBox's types just cannot carry it.
 */
export function ref<T extends TSchema>(schema: T, options: SchemaOptions = {}) {
  return Type.Unsafe<Static<T>>(Type.Ref(schema.$id!, options))
}
